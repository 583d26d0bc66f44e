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
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/graduator/graduator/controllers"
)

// Operator is a manager running in the test process: Graduator's, wired as
// the binary wires it (controllers.CacheOptions, controllers.Setup), or a
// plain one (StartManager).
type Operator struct {
	cancel   context.CancelFunc
	done     chan error
	stopOnce sync.Once
	stopErr  error
}

// StartOperator starts the manager with Graduator's controllers as cfg's
// user (wrap cfg's transport to observe or fault its requests), without
// metrics or probe servers, until Stop.
func StartOperator(cfg *rest.Config, scheme *runtime.Scheme) (*Operator, error) {
	return startManager(cfg, ctrl.Options{Scheme: scheme, Cache: controllers.CacheOptions()}, func(mgr ctrl.Manager) error {
		if err := controllers.Setup(mgr, controllers.Options{MaxConcurrentGraduations: 2}); err != nil {
			return fmt.Errorf("set up the controllers: %w", err)
		}
		return nil
	})
}

// StartManager starts a plain manager with what add puts into it (an
// operator that embeds crdmigrate, say), without metrics or probe servers,
// until Stop.
func StartManager(cfg *rest.Config, scheme *runtime.Scheme, add func(ctrl.Manager) error) (*Operator, error) {
	return startManager(cfg, ctrl.Options{Scheme: scheme}, add)
}

func startManager(cfg *rest.Config, opts ctrl.Options, add func(ctrl.Manager) error) (*Operator, error) {
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.HealthProbeBindAddress = "0"
	// Specs start and stop several managers in one process.
	opts.Controller = config.Controller{SkipNameValidation: ptr.To(true)}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("create the manager: %w", err)
	}
	if err := add(mgr); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	o := &Operator{cancel: cancel, done: make(chan error, 1)}
	go func() { o.done <- mgr.Start(ctx) }()
	return o, nil
}

// StopTimeout bounds how long Stop waits for the manager to return.
const StopTimeout = time.Minute

// Stop stops the manager the way SIGTERM does and returns what its Start
// returned; it may be called again. A manager that does not return within
// StopTimeout is reported as an error, so a hang fails the spec instead of
// freezing the suite.
func (o *Operator) Stop() error {
	o.cancel()
	o.stopOnce.Do(func() {
		select {
		case o.stopErr = <-o.done:
		case <-time.After(StopTimeout):
			o.stopErr = fmt.Errorf("the manager did not stop within %s of its context's cancellation", StopTimeout)
		}
	})
	return o.stopErr
}
