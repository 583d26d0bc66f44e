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
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"

	"github.com/graduator/graduator/internal/errclass"
)

// defaultClusterTimeout bounds one cluster's read when --request-timeout is
// not set: across a fleet, one unreachable cluster must not hold up the
// answer for the others.
const defaultClusterTimeout = 30 * time.Second

// clusterFlags are the flags status and scan take to read many clusters, as
// kubectl users expect them: --context repeated or comma-separated, or
// --all-contexts, from the kubeconfig (--kubeconfig, or KUBECONFIG's list).
type clusterFlags struct {
	contexts    []string
	allContexts bool
	parallel    int
}

// addFlags adds --context (shadowing the root's single-valued one),
// --all-contexts and --parallel.
func (c *clusterFlags) addFlags(fs *pflag.FlagSet) {
	c.parallel = 8
	fs.StringSliceVar(&c.contexts, "context", nil,
		"The kubeconfig context(s) to read: repeat the flag or separate names with commas. Default: the current context.")
	fs.BoolVar(&c.allContexts, "all-contexts", false, "Read every context of the kubeconfig (KUBECONFIG may list many files).")
	fs.IntVar(&c.parallel, "parallel", c.parallel, "How many clusters are read at once.")
}

// many reports whether more than one cluster is meant: the output is then
// keyed by context.
func (c *clusterFlags) many() bool { return c.allContexts || len(c.contexts) > 1 }

// validate refuses contradictory flags before anything is read.
func (c *clusterFlags) validate() error {
	switch {
	case c.allContexts && len(c.contexts) > 0:
		return errors.New("--context and --all-contexts exclude each other: name the contexts, or take them all")
	case c.parallel < 1:
		return fmt.Errorf("--parallel must be at least 1, got %d", c.parallel)
	}
	for _, name := range c.contexts {
		if strings.TrimSpace(name) == "" {
			return errors.New("--context names an empty context")
		}
	}
	return nil
}

// cluster is one cluster to read: its context's name and client config, or
// why that config could not be built (a row of its own, as an unreachable
// cluster is).
type cluster struct {
	Context string
	Config  *rest.Config
	Err     error
	Timeout time.Duration
}

// clusters resolves the clusters to read, before anything is read from
// them: every named context must exist in the kubeconfig, which must be
// readable and hold contexts. With one context or none, the root's flags
// build the config as for every other command (an in-cluster config
// included: a CronJob has no kubeconfig).
func (c *clusterFlags) clusters(flags *genericclioptions.ConfigFlags) ([]cluster, error) {
	if !c.many() {
		if len(c.contexts) == 1 {
			flags.Context = &c.contexts[0]
		}
		cfg, err := restConfig(flags)
		if err != nil {
			return nil, err
		}
		return []cluster{{Context: currentContext(flags), Config: cfg, Timeout: clusterTimeout(cfg)}}, nil
	}
	loader := flags.ToRawKubeConfigLoader()
	raw, err := loader.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("read the kubeconfig: %w", err)
	}
	files := strings.Join(loader.ConfigAccess().GetLoadingPrecedence(), string(filepath.ListSeparator))
	if len(raw.Contexts) == 0 {
		return nil, fmt.Errorf("the kubeconfig (%s) holds no context", files)
	}
	names := c.contexts
	if c.allContexts {
		names = make([]string, 0, len(raw.Contexts))
		for name := range raw.Contexts {
			names = append(names, name)
		}
		sort.Strings(names)
	}
	var out []cluster
	seen := map[string]bool{}
	for _, name := range names {
		if seen[name] {
			continue
		}
		seen[name] = true
		if _, ok := raw.Contexts[name]; !ok {
			return nil, fmt.Errorf("context %q is not in the kubeconfig (%s): kubectl config get-contexts lists them", name, files)
		}
		cfg, err := restConfig(contextFlags(flags, name))
		if err != nil {
			out = append(out, cluster{Context: name, Err: err})
			continue
		}
		out = append(out, cluster{Context: name, Config: cfg, Timeout: clusterTimeout(cfg)})
	}
	return out, nil
}

// contextFlags are the root's kubeconfig flags with context name: the
// user's other flags (--as, --namespace, --request-timeout, ...) apply to
// every context, as kubectl would apply them. No cache directory: these
// commands use no discovery, and one cluster's cache must never answer for
// another. No basic-auth password: an interactive prompt per cluster, in
// parallel, would be unusable.
func contextFlags(f *genericclioptions.ConfigFlags, name string) *genericclioptions.ConfigFlags {
	return &genericclioptions.ConfigFlags{
		KubeConfig: f.KubeConfig, Context: &name, ClusterName: f.ClusterName, AuthInfoName: f.AuthInfoName, Namespace: f.Namespace,
		APIServer: f.APIServer, TLSServerName: f.TLSServerName, Insecure: f.Insecure, CertFile: f.CertFile, KeyFile: f.KeyFile,
		CAFile: f.CAFile, BearerToken: f.BearerToken, Impersonate: f.Impersonate, ImpersonateUID: f.ImpersonateUID,
		ImpersonateGroup: f.ImpersonateGroup, ImpersonateUserExtra: f.ImpersonateUserExtra, Timeout: f.Timeout,
		DisableCompression: f.DisableCompression, ProxyURL: f.ProxyURL,
	}
}

// currentContext names the one cluster read: the context given or the
// kubeconfig's current one, "in-cluster" without a kubeconfig.
func currentContext(flags *genericclioptions.ConfigFlags) string {
	if flags.Context != nil && *flags.Context != "" {
		return *flags.Context
	}
	raw, err := flags.ToRawKubeConfigLoader().RawConfig()
	if err != nil || raw.CurrentContext == "" {
		return "in-cluster"
	}
	return raw.CurrentContext
}

// clusterTimeout is how long one cluster's whole read may take:
// --request-timeout, else defaultClusterTimeout.
func clusterTimeout(cfg *rest.Config) time.Duration {
	if cfg.Timeout > 0 {
		return cfg.Timeout
	}
	return defaultClusterTimeout
}

// ClusterError is why a cluster could not be read.
type ClusterError struct {
	// Reason is Unreachable, Timeout, Forbidden, Unauthorized or Error.
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// clusterError classifies err, for the row of a cluster not read.
func clusterError(err error) *ClusterError {
	if err == nil {
		return nil
	}
	reason := "Error"
	var dnsErr *net.DNSError
	var opErr *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errclass.IsTimeout(err):
		reason = "Timeout"
	case apierrors.IsForbidden(err):
		reason = "Forbidden"
	case apierrors.IsUnauthorized(err):
		reason = "Unauthorized"
	case errors.Is(err, syscall.ECONNREFUSED), errors.As(err, &dnsErr), errors.As(err, &opErr):
		reason = "Unreachable"
	}
	return &ClusterError{Reason: reason, Message: strings.Join(strings.Fields(err.Error()), " ")}
}

// eachCluster calls read for every cluster, at most parallel at once, each
// under its own timeout (when it has one), with clients of its own (read builds them from the
// cluster's config: no discovery or REST mapping is shared between
// clusters). Results are in the clusters' order.
func eachCluster[T any](ctx context.Context, clusters []cluster, parallel int,
	read func(ctx context.Context, cfg *rest.Config) (T, error)) ([]T, []error) {
	results := make([]T, len(clusters))
	errs := make([]error, len(clusters))
	slots := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i := range clusters {
		if clusters[i].Err != nil {
			errs[i] = clusters[i].Err
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			cctx, cancel := ctx, context.CancelFunc(func() {})
			if clusters[i].Timeout > 0 { // none: read bounds its own steps
				cctx, cancel = context.WithTimeout(ctx, clusters[i].Timeout)
			}
			defer cancel()
			results[i], errs[i] = read(cctx, clusters[i].Config)
			if errs[i] != nil && ctx.Err() == nil && (cctx.Err() != nil || errclass.IsTimeout(errs[i])) {
				errs[i] = fmt.Errorf("no answer within %s (--request-timeout): %w", clusters[i].Timeout, errs[i])
			}
		}()
	}
	wg.Wait()
	return results, errs
}
