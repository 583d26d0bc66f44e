/*
Copyright 2026 The Graduator Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package envtestutil

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ManagerProcess runs a binary (cmd/manager, an operator embedding
// crdmigrate) as a real process, the way a Deployment does: when it exits on
// its own (leader election lost, say) it is started again, as the kubelet
// would, at most maxCrashes times. Every start gets fresh ports (Args), and
// the process's output goes to one log file across restarts.
type ManagerProcess struct {
	name    string
	binary  string
	args    func() (args, ports []string)
	logFile *os.File

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	killing bool // the current process is being killed or stopped by us
	stopped bool
	starts  int
	crashes int
	pids    []int
	ports   []string
}

// maxCrashes bounds the restarts of a process that keeps exiting on its own.
const maxCrashes = 30

// restartDelay is the kubelet's restart delay, roughly.
const restartDelay = time.Second

// NewManagerProcess prepares a process of binary, named name in its log
// (logPath); args returns the arguments of each start and the local
// addresses they bind, which Ports reports. Start starts it.
func NewManagerProcess(name, binary, logPath string, args func() (args, ports []string)) (*ManagerProcess, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create the log of %s: %w", name, err)
	}
	return &ManagerProcess{name: name, binary: binary, args: args, logFile: f}, nil
}

// Start starts the process.
func (m *ManagerProcess) Start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.startLocked()
}

func (m *ManagerProcess) startLocked() error {
	args, ports := m.args()
	cmd := exec.Command(m.binary, args...)
	cmd.Stdout, cmd.Stderr = m.logFile, m.logFile
	m.starts++
	_, _ = fmt.Fprintf(m.logFile, "---- %s: start #%d at %s\n", m.name, m.starts, time.Now().Format(time.RFC3339Nano))
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", m.name, err)
	}
	exited := make(chan struct{})
	m.cmd, m.exited, m.killing = cmd, exited, false
	m.pids = append(m.pids, cmd.Process.Pid)
	m.ports = append(m.ports, ports...)
	go m.supervise(cmd, exited)
	return nil
}

// supervise waits for the process and starts it again when it exited on its
// own.
func (m *ManagerProcess) supervise(cmd *exec.Cmd, exited chan struct{}) {
	err := cmd.Wait()
	close(exited)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != cmd || m.killing || m.stopped || m.crashes >= maxCrashes {
		return
	}
	m.crashes++
	_, _ = fmt.Fprintf(m.logFile, "---- %s exited on its own (%v); restarting it\n", m.name, err)
	time.Sleep(restartDelay)
	if !m.stopped {
		if err := m.startLocked(); err != nil {
			_, _ = fmt.Fprintf(m.logFile, "---- cannot restart %s: %v\n", m.name, err)
		}
	}
}

// Kill sends SIGKILL and waits until the process is gone; it is not
// restarted (Start does).
func (m *ManagerProcess) Kill() error {
	m.mu.Lock()
	cmd, exited := m.cmd, m.exited
	m.killing = true
	m.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s: %w", m.name, err)
	}
	select {
	case <-exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s did not exit within 10 s of SIGKILL", m.name)
	}
}

// Stop stops the process the way Kubernetes does (SIGTERM, SIGKILL after
// grace) and closes the log; it may be called again.
func (m *ManagerProcess) Stop(grace time.Duration) {
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return
	}
	m.stopped, m.killing = true, true
	cmd, exited := m.cmd, m.exited
	m.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(grace):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	_ = m.logFile.Close()
}

// Restarts is how many times the process exited on its own and was
// started again.
func (m *ManagerProcess) Restarts() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.crashes
}

// Leftovers returns what the process left behind: the processes it started
// that are still alive and the addresses they bound that something still
// listens on. Call it after Stop.
func (m *ManagerProcess) Leftovers() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, pid := range m.pids {
		if err := syscall.Kill(pid, 0); err == nil {
			out = append(out, fmt.Sprintf("process %d of %s is alive", pid, m.name))
		}
	}
	for _, addr := range m.ports {
		if err := PortFree(addr); err != nil {
			out = append(out, fmt.Sprintf("%s of %s: %v", addr, m.name, err))
		}
	}
	return out
}

// LogPath is the file the process writes its output to.
func (m *ManagerProcess) LogPath() string { return m.logFile.Name() }

// FreeLocalAddr returns a loopback address with a port nobody listens on.
func FreeLocalAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

// PortFree returns nil when nothing listens on addr (host:port).
func PortFree(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil
	}
	_ = conn.Close()
	return errors.New("something still listens")
}

// Tail returns the last n lines of the file at path (or the error reading
// it).
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
