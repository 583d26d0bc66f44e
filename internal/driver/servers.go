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

package driver

import (
	"context"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/graduator/graduator/internal/apiservers"
	"github.com/graduator/graduator/internal/graduation"
)

// checkServers asks every API server whether it serves the hash of crd's
// storage version (package apiservers: one by one, or through the front
// door where they cannot be dialled), while storedVersions lists another
// version: the plan starts a run only once every one does,
// and prunes only when they still do. It returns the verdict and since when
// every server was found agreeing (zero unless they agree now), in the
// plan's time now.
func (d *Driver) checkServers(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, now time.Time) (apiservers.Verdict, time.Time) {
	if crd == nil || d.Config == nil || len(graduation.StaleStoredVersions(crd)) == 0 {
		return apiservers.Verdict{}, time.Time{}
	}
	storage := graduation.StorageVersion(crd)
	v := d.checker().Check(ctx, apiservers.Resource{
		Group: crd.Spec.Group, Version: storage, Kind: crd.Spec.Names.Kind, Plural: crd.Spec.Names.Plural,
	})
	since := d.agreed.observe(string(crd.UID)+"/"+storage, v.State == apiservers.Agree, now)
	log.FromContext(ctx).V(1).Info("asked every API server", "crd", crd.Name, "storageVersion", storage,
		"state", v.State, "servers", v.Servers, "reason", v.Reason)
	return v, since
}

// checker is the door's Checker: one for every check, so that a server
// found unreachable is not dialled again at each one.
func (d *Driver) checker() *apiservers.Checker {
	d.checkerOnce.Do(func() { d.serverChecker = &apiservers.Checker{Config: d.Config, Clock: d.Clock} })
	return d.serverChecker
}

// agreements remembers, per CRD and storage version, since when every API
// server was found agreeing: the short settle after it is counted from
// then. A restarted door counts from its first check, which only waits a
// little longer.
type agreements struct {
	mu    sync.Mutex
	since map[string]time.Time
}

func (a *agreements) observe(key string, agree bool, now time.Time) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !agree {
		delete(a.since, key)
		return time.Time{}
	}
	if a.since == nil {
		a.since = map[string]time.Time{}
	}
	if _, ok := a.since[key]; !ok {
		a.since[key] = now
	}
	return a.since[key]
}
