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

package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// kubeconfig writes a kubeconfig with the given contexts, each on a server
// of its own, and returns its path.
func kubeconfig(t *testing.T, contexts ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Config\nclusters:\n")
	for i, c := range contexts {
		fmt.Fprintf(&b, "- name: %s\n  cluster:\n    server: https://127.0.0.1:%d\n", c, 1+i)
	}
	b.WriteString("users:\n- name: u\n  user:\n    token: t\ncontexts:\n")
	for _, c := range contexts {
		fmt.Fprintf(&b, "- name: %s\n  context:\n    cluster: %s\n    user: u\n", c, c)
	}
	if len(contexts) > 0 {
		fmt.Fprintf(&b, "current-context: %s\n", contexts[0])
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Bad input is refused with a clear error naming it, before any cluster is
// read (every server here is unreachable: reading one would show as a
// timeout or refusal, not as these errors), and exits 2 from scan.
func TestScanRefusesBadContextsBeforeReadingAnything(t *testing.T) {
	a, b := kubeconfig(t, "a", "b"), kubeconfig(t, "c")
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		args       []string
		kubeconfig string
		want       string
	}{
		{"unknown context", []string{"--kubeconfig", a, "--context", "a,nope"}, "", `context "nope" is not in the kubeconfig`},
		{"both context flags", []string{"--kubeconfig", a, "--context", "a", "--all-contexts"}, "", "--context and --all-contexts exclude each other"},
		{"missing kubeconfig", []string{"--kubeconfig", filepath.Join(t.TempDir(), "none"), "--all-contexts"}, "", "no such file"},
		{"empty kubeconfig", []string{"--kubeconfig", empty, "--all-contexts"}, "", "holds no context"},
		{"a context of the second file of KUBECONFIG, and one nowhere", []string{"--context", "c,d"}, a + ":" + b, `context "d" is not in the kubeconfig`},
		{"bad --fail-on", []string{"--kubeconfig", a, "--fail-on", "fatal"}, "", `unknown severity "fatal"`},
		{"--parallel 0", []string{"--kubeconfig", a, "--all-contexts", "--parallel", "0"}, "", "--parallel must be at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.kubeconfig)
			var out, errOut bytes.Buffer
			root := NewRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
			root.SetArgs(append([]string{"scan", "--request-timeout", "1ms"}, tc.args...))
			err := root.ExecuteContext(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if code := ExitCode(err); code != ExitBadInput {
				t.Errorf("exit %d, want %d", code, ExitBadInput)
			}
			if out.Len() > 0 {
				t.Errorf("something was printed, so read: %s", out.String())
			}
		})
	}
}

// KUBECONFIG's list is merged: --all-contexts takes every context of every
// file, sorted, each with its own server.
func TestAllContextsTakesEveryFileOfKUBECONFIG(t *testing.T) {
	t.Setenv("KUBECONFIG", kubeconfig(t, "b", "a")+string(filepath.ListSeparator)+kubeconfig(t, "c"))
	flags := clusterFlags{allContexts: true, parallel: 1}
	clusters, err := flags.clusters(genericclioptions.NewConfigFlags(false))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range clusters {
		got = append(got, c.Context+"="+c.Config.Host)
	}
	if want := "a=https://127.0.0.1:2 b=https://127.0.0.1:1 c=https://127.0.0.1:1"; strings.Join(got, " ") != want {
		t.Errorf("clusters %v, want %s", got, want)
	}
}

func TestClusterErrorSaysWhy(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:1", Err: &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{refused, "Unreachable"},
		{fmt.Errorf("list: %w", &url.Error{Op: "Get", Err: context.DeadlineExceeded}), "Timeout"},
		{apierrors.NewForbidden(schema.GroupResource{Resource: "customresourcedefinitions"}, "", errors.New("no")), "Forbidden"},
		{apierrors.NewUnauthorized("who"), "Unauthorized"},
		{errors.New("something\nelse"), "Error"},
	} {
		got := clusterError(tc.err)
		if got.Reason != tc.want || strings.Contains(got.Message, "\n") {
			t.Errorf("%v: %+v, want reason %s on one line", tc.err, got, tc.want)
		}
	}
}

// status refuses the same bad input before reading anything; its bad input
// exits 1, as every usage error of status.
func TestStatusRefusesBadContextsBeforeReadingAnything(t *testing.T) {
	a := kubeconfig(t, "a", "b")
	for _, args := range [][]string{
		{"--context", "a,nope"},
		{"--context", "a", "--all-contexts"},
		{"--context", "a,b", "--watch"},
		{"--all-contexts", "pizzas.example.com"},
	} {
		var out bytes.Buffer
		root := NewRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
		root.SetArgs(append([]string{"status", "--kubeconfig", a, "--request-timeout", "1ms"}, args...))
		err := root.ExecuteContext(context.Background())
		if err == nil || ExitCode(err) != ExitUsage || out.Len() > 0 {
			t.Errorf("status %v: %v (exit %d), printed %q; want a usage error before any read", args, err, ExitCode(err), out.String())
		}
	}
}
