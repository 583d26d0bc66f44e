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

package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sync/errgroup"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/graduator/graduator/internal/cli"
	"github.com/graduator/graduator/test/envtestutil"
)

// BenchmarkScan is `graduator scan` (in process, -o json) of one cluster and
// of three in parallel, each holding FLEET_BENCH_CRDS CRDs (300 by default;
// every tenth with a deprecated served version, so the scan has findings),
// each version's schema FLEET_BENCH_SCHEMA_KB KiB (about 1 by default; real
// CRDs weigh 10 to 300).
// The target: three clusters of 300 CRDs in under 5 s. Run it alone:
//
//	KUBEBUILDER_ASSETS=... go test ./test/fleet/ -run '^$' -bench Scan -benchtime 5x
func BenchmarkScan(b *testing.B) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		b.Skip("KUBEBUILDER_ASSETS must point at kube-apiserver and etcd")
	}
	n := 300
	if s := os.Getenv("FLEET_BENCH_CRDS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	schemaKB := 0
	if s := os.Getenv("FLEET_BENCH_SCHEMA_KB"); s != "" {
		var err error
		if schemaKB, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	kubeconfig := benchFleet(b, 3, n, schemaKB)
	for _, contexts := range []string{"bench-0", "bench-0,bench-1,bench-2"} {
		b.Run(fmt.Sprintf("clusters=%d/crds=%d/schemaKB=%d", strings.Count(contexts, ",")+1, n, schemaKB), func(b *testing.B) {
			for b.Loop() {
				root := cli.NewRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard})
				root.SetArgs([]string{"scan", "--kubeconfig", kubeconfig, "--context", contexts, "-o", "json"})
				if err := root.ExecuteContext(context.Background()); cli.ExitCode(err) != 1 {
					b.Fatalf("want findings (exit 1), got %v", err)
				}
			}
		})
	}
}

// benchFleet starts planes control planes with n CRDs each and writes a
// kubeconfig with a context bench-I per plane, as the admin.
func benchFleet(b *testing.B, planes, n, schemaKB int) string {
	b.Helper()
	envs := make([]*envtestutil.Env, planes)
	b.Cleanup(func() {
		for _, env := range envs {
			if env != nil {
				_ = env.Stop()
			}
		}
	})
	errs := make([]error, planes)
	var wg sync.WaitGroup
	for i := range envs {
		wg.Go(func() {
			if envs[i], errs[i] = envtestutil.Start(envtestutil.Options{Unthrottled: true}); errs[i] == nil {
				errs[i] = plantMany(envs[i], n, schemaKB)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	config := clientcmdapi.NewConfig()
	for i, env := range envs {
		if err := addContext(config, fmt.Sprintf("bench-%d", i), env, envtest.User{Name: "admin", Groups: []string{"system:masters"}}); err != nil {
			b.Fatal(err)
		}
	}
	path := filepath.Join(b.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*config, path); err != nil {
		b.Fatal(err)
	}
	return path
}

// plantMany creates n CRDs, 8 at a time, with a description of schemaKB
// KiB in each version's schema.
func plantMany(env *envtestutil.Env, n, schemaKB int) error {
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			kind := fmt.Sprintf("Bench%d", i)
			crd := newCRD(kind, v1Served, v2)
			if i%10 == 0 {
				crd = newCRD(kind, v1Depr, v2)
			}
			for _, v := range crd.Spec.Versions {
				v.Schema.OpenAPIV3Schema.Description = strings.Repeat("x", schemaKB<<10)
			}
			return env.Client.Create(context.Background(), crd)
		})
	}
	return g.Wait()
}
