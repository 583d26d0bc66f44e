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
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// auditPolicy records, at Metadata level, when each write that is not a
// create completed: enough to tell who patched which object when, and small.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  verbs: ["patch", "update"]
- level: None
`

// writesPolicy records every write, creates and deletes included, at
// Metadata level: what a suite needs to show that a client wrote nothing.
const writesPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

// AuditLog is kube-apiserver's audit log of patches and updates, as JSON
// lines in a file: the server's own account of who wrote which object, which
// no client of the test can fake or miss.
type AuditLog struct {
	path string
}

// EnableAuditLog configures env's kube-apiserver (before it starts) to log
// every patch and update in dir.
func EnableAuditLog(env *envtest.Environment, dir string) (*AuditLog, error) {
	return enableAuditLog(env, dir, auditPolicy)
}

// EnableWriteAuditLog configures env's kube-apiserver (before it starts) to
// log every write, creates and deletes included, in dir: for WritesBy.
func EnableWriteAuditLog(env *envtest.Environment, dir string) (*AuditLog, error) {
	return enableAuditLog(env, dir, writesPolicy)
}

func enableAuditLog(env *envtest.Environment, dir, auditPolicy string) (*AuditLog, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, fmt.Errorf("write the audit policy: %w", err)
	}
	log := &AuditLog{path: filepath.Join(dir, "audit.log")}
	env.ControlPlane.GetAPIServer().Configure().
		Set("audit-policy-file", policy).
		Set("audit-log-path", log.path).
		Set("audit-log-format", "json").
		// Every event is in the file when the request returns.
		Set("audit-log-mode", "blocking")
	return log, nil
}

// Write is one write of an object as the audit log tells it.
type Write struct {
	User                      string
	Namespace, Name, Resource string
	Verb                      string
	DryRun                    bool
	Code                      int32
	Received, Completed       time.Time
}

// Writes returns the completed writes of resource (plural) in group,
// subresources excluded, in log order.
func (l *AuditLog) Writes(group, resource string) ([]Write, error) {
	writes, _, err := l.WritesFrom(group, resource, 0)
	return writes, err
}

// WritesFrom is Writes from byte offset on (0: the start), up to the last
// complete line; it returns the offset after that line, from which the next
// call goes on: a reader following the log as it grows reads each event
// once.
func (l *AuditLog) WritesFrom(group, resource string, offset int64) ([]Write, int64, error) {
	return l.writesFrom(offset, func(ev *auditv1.Event) bool {
		ref := ev.ObjectRef
		return ref != nil && ref.APIGroup == group && ref.Resource == resource && ref.Subresource == ""
	})
}

// WritesBy returns every completed write by user, of any resource and
// subresource, in log order (EnableWriteAuditLog logs creates and deletes
// too; EnableAuditLog only patches and updates).
func (l *AuditLog) WritesBy(user string) ([]Write, error) {
	writes, _, err := l.writesFrom(0, func(ev *auditv1.Event) bool { return ev.User.Username == user })
	return writes, err
}

// writesFrom returns the completed writes that keep selects, from byte
// offset on, and the offset after the last complete line.
func (l *AuditLog) writesFrom(offset int64, keep func(*auditv1.Event) bool) ([]Write, int64, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, offset, fmt.Errorf("open the audit log: %w", err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, offset, fmt.Errorf("seek in the audit log: %w", err)
	}
	var writes []Write
	reader := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := reader.ReadBytes('\n')
		if err == io.EOF {
			return writes, offset, nil // a partial last line is read next time
		}
		if err != nil {
			return nil, offset, fmt.Errorf("read the audit log: %w", err)
		}
		offset += int64(len(line))
		var ev auditv1.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, offset, fmt.Errorf("decode an audit event: %w", err)
		}
		if ev.Stage == auditv1.StageResponseComplete && keep(&ev) {
			writes = append(writes, writeOf(&ev))
		}
	}
}

// writeOf is the Write a completed write event tells.
func writeOf(ev *auditv1.Event) Write {
	w := Write{User: ev.User.Username, Verb: ev.Verb,
		DryRun:   strings.Contains(ev.RequestURI, "dryRun="),
		Received: ev.RequestReceivedTimestamp.Time, Completed: ev.StageTimestamp.Time,
	}
	if ref := ev.ObjectRef; ref != nil {
		w.Namespace, w.Name, w.Resource = ref.Namespace, ref.Name, ref.Resource
	}
	if ev.ResponseStatus != nil {
		w.Code = ev.ResponseStatus.Code
	}
	if w.Code == 0 {
		w.Code = http.StatusOK
	}
	return w
}
