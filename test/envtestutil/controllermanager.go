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
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ErrNoControllerManager says that kube-controller-manager is not among the
// envtest binaries; `make envtest-assets` builds it (ENVTEST_CONTROLLER_MANAGER).
var ErrNoControllerManager = errors.New("kube-controller-manager is not in $KUBEBUILDER_ASSETS: " +
	"run `make envtest-assets` (it builds it with ENVTEST_CONTROLLER_MANAGER=true)")

// InTreeMigratorControllers are the kube-controller-manager controllers the
// in-tree StorageVersionMigration needs: the migrator itself, and the garbage
// collector, whose informers (its dependency graph) the migrator lists from.
var InTreeMigratorControllers = []string{"garbage-collector-controller", "storage-version-migrator-controller"}

// ControllerManager is a kube-controller-manager process running the given
// controllers against an envtest control plane.
type ControllerManager struct {
	cmd  *exec.Cmd
	done chan error
}

// StartControllerManager starts kube-controller-manager from the envtest
// binaries against env's API server, as a system:masters user, with only the
// named controllers, no leader election and no serving port. Stop it with
// Stop; it also dies with the test process (parent-death signal).
func StartControllerManager(env *envtest.Environment, out io.Writer, controllers ...string) (*ControllerManager, error) {
	binary := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-controller-manager")
	if _, err := os.Stat(binary); err != nil {
		return nil, ErrNoControllerManager
	}
	user, err := env.AddUser(envtest.User{Name: "kube-controller-manager", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("add a user for kube-controller-manager: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig for kube-controller-manager: %w", err)
	}
	dir, err := os.MkdirTemp("", "envtest-kcm-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(binary,
		"--kubeconfig", path,
		"--controllers", strings.Join(controllers, ","),
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
		"-v=2",
	)
	cmd.Stdout, cmd.Stderr = out, out
	// Dies with the test process even when it is killed without cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start kube-controller-manager: %w", err)
	}
	m := &ControllerManager{cmd: cmd, done: make(chan error, 1)}
	go func() {
		m.done <- cmd.Wait()
		_ = os.RemoveAll(dir)
	}()
	return m, nil
}

// Stop sends SIGTERM, then SIGKILL after 10 s, and waits for the exit.
func (m *ControllerManager) Stop() {
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-m.done
	}
}
