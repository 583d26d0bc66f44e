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
	"encoding/json"
	"fmt"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
)

// PolicyStore keeps a graduation in a CRDVersionPolicy's status: the
// operator's store.
type PolicyStore struct {
	// Client writes the status subresource.
	Client client.Client
	// Reader reads the policy uncached: a plan never starts from a copy
	// older than the last status written (a cache may lag behind it).
	Reader client.Reader
	Name   string
	// OnSaved, when set, is called with every status written.
	OnSaved func(*graduatorv1alpha1.CRDVersionPolicy)

	// base is the policy as last loaded or saved: what a Save may write
	// over.
	base *graduatorv1alpha1.CRDVersionPolicy
}

// Load reads the policy uncached. The first Load is the base a Save writes
// over; later ones (a spec reread between steps) leave the base alone, so
// a status someone else wrote meanwhile is not written over.
func (s *PolicyStore) Load(ctx context.Context) (*graduatorv1alpha1.CRDVersionPolicy, error) {
	policy := &graduatorv1alpha1.CRDVersionPolicy{}
	if err := s.Reader.Get(ctx, client.ObjectKey{Name: s.Name}, policy); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read policy %s: %w", s.Name, err)
	}
	if s.base == nil {
		s.base = policy.DeepCopy()
	}
	return policy, nil
}

// conflictRetries is how often a store writes again on a fresh copy when
// its optimistic lock met a change that was not to what it saves (a spec,
// metadata or another annotation edited meanwhile). A change to what it
// saves is a conflict at once, whatever the count.
const conflictRetries = 3

// Save patches the status subresource with what changed since the base,
// under an optimistic lock on the base's resourceVersion. A spec or
// metadata edit made meanwhile (the resourceVersion moved, the status did
// not) is not a conflict: the patch is made again on the fresh copy. A
// status that changed meanwhile is: Save returns the conflict and writes
// nothing.
func (s *PolicyStore) Save(ctx context.Context, policy *graduatorv1alpha1.CRDVersionPolicy) error {
	if s.base == nil {
		s.base = policy.DeepCopy()
	}
	for attempt := 0; ; attempt++ {
		if equality.Semantic.DeepEqual(s.base.Status, policy.Status) {
			return nil
		}
		// Patch a copy: the response must not replace the structs the
		// driver holds pointers into (the running migration's status).
		patched := s.base.DeepCopy()
		policy.Status.DeepCopyInto(&patched.Status)
		err := s.Client.Status().Patch(ctx, patched, client.MergeFromWithOptions(s.base, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil:
			s.base = patched
			if s.OnSaved != nil {
				s.OnSaved(patched)
			}
			return nil
		case apierrors.IsNotFound(err):
			return nil // deleted meanwhile: no status left to write
		case !apierrors.IsConflict(err) || attempt >= conflictRetries:
			return fmt.Errorf("write status of policy %s: %w", s.Name, err)
		}
		fresh := &graduatorv1alpha1.CRDVersionPolicy{}
		if err := s.Reader.Get(ctx, client.ObjectKey{Name: s.Name}, fresh); err != nil {
			return fmt.Errorf("write status of policy %s: reread after a conflict: %w", s.Name, err)
		}
		if !equality.Semantic.DeepEqual(fresh.Status, s.base.Status) {
			return apierrors.NewConflict(schema.GroupResource{Group: graduatorv1alpha1.GroupVersion.Group, Resource: "crdversionpolicies"},
				s.Name, fmt.Errorf("its status was written by someone else since this graduation read it; not writing over it"))
		}
		s.base = fresh
	}
}

// MemoryStore keeps a graduation in memory: the CLI's and the rehearsal
// kit's store. A rerun resumes from the engine's checkpoint instead (objects
// written since it are skipped without a write).
type MemoryStore struct {
	Policy *graduatorv1alpha1.CRDVersionPolicy
}

// Load returns the policy held.
func (s *MemoryStore) Load(context.Context) (*graduatorv1alpha1.CRDVersionPolicy, error) {
	return s.Policy.DeepCopy(), nil
}

// Save keeps the status.
func (s *MemoryStore) Save(_ context.Context, policy *graduatorv1alpha1.CRDVersionPolicy) error {
	policy.Status.DeepCopyInto(&s.Policy.Status)
	return nil
}

// StateAnnotation is the annotation on a CRD in which the embedded
// controller keeps its graduation (CRDStore): the run's checkpoint and
// progress, the phase, the conditions and the retries, as JSON.
const StateAnnotation = "graduator.io/graduation"

// CRDStore keeps a graduation in an annotation on the CRD itself
// (StateAnnotation): the embedded controller's store, durable across
// restarts without a CRD of its own. Spec is the policy the door runs; it
// is not stored.
type CRDStore struct {
	// Client patches the CRD.
	Client client.Client
	// Reader reads the CRD uncached.
	Reader client.Reader
	Spec   graduatorv1alpha1.CRDVersionPolicySpec
	Name   string
	// Unsaved, shared by the door's stores, holds the graduation of a CRD
	// whose annotation the door may not write (the right to patch the CRD
	// is missing): the stall that says so then keeps its retries, its
	// backoff and its one Event across reconciles until the right is
	// granted. Nil: nothing is held.
	Unsaved *UnsavedStates

	// base is the CRD as last loaded or saved: its resourceVersion locks
	// the next Save.
	base *apiextensionsv1.CustomResourceDefinition
}

// UnsavedStates holds, by CRD name, graduations that could not be saved on
// their CRD (CRDStore.Unsaved). Only a stall is ever held: the access check
// that needs the right to patch the CRD runs before anything is written.
type UnsavedStates struct{ states sync.Map }

func (u *UnsavedStates) load(name string) (graduatorv1alpha1.CRDVersionPolicyStatus, bool) {
	if u == nil {
		return graduatorv1alpha1.CRDVersionPolicyStatus{}, false
	}
	status, ok := u.states.Load(name)
	if !ok {
		return graduatorv1alpha1.CRDVersionPolicyStatus{}, false
	}
	return *status.(*graduatorv1alpha1.CRDVersionPolicyStatus).DeepCopy(), true
}

func (u *UnsavedStates) keep(name string, status graduatorv1alpha1.CRDVersionPolicyStatus) {
	if u != nil {
		u.states.Store(name, status.DeepCopy())
	}
}

func (u *UnsavedStates) forget(name string) {
	if u != nil {
		u.states.Delete(name)
	}
}

// Load reads the CRD and the graduation in its annotation; nil when the CRD
// is gone. An annotation that does not parse starts a fresh graduation.
func (s *CRDStore) Load(ctx context.Context) (*graduatorv1alpha1.CRDVersionPolicy, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := s.Reader.Get(ctx, client.ObjectKey{Name: s.Name}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read CRD %s: %w", s.Name, err)
	}
	if s.base == nil {
		s.base = crd
	}
	policy := &graduatorv1alpha1.CRDVersionPolicy{Spec: *s.Spec.DeepCopy()}
	policy.Name, policy.Generation = s.Name, 1
	if raw := crd.Annotations[StateAnnotation]; raw != "" {
		// A state that does not parse is treated as none: the run starts
		// over from a new checkpoint, which costs writes but no safety.
		_ = json.Unmarshal([]byte(raw), &policy.Status)
	} else if status, ok := s.Unsaved.load(s.Name); ok {
		policy.Status = status
	}
	return policy, nil
}

// Save writes the status into the annotation, under an optimistic lock on
// the CRD's resourceVersion. A CRD changed meanwhile whose annotation is
// still the one this store wrote is patched again on the fresh copy;
// an annotation someone else wrote is a conflict and nothing is written.
func (s *CRDStore) Save(ctx context.Context, policy *graduatorv1alpha1.CRDVersionPolicy) error {
	state, err := json.Marshal(policy.Status)
	if err != nil {
		return fmt.Errorf("encode the graduation of %s: %w", s.Name, err)
	}
	if s.base == nil {
		if _, err := s.Load(ctx); err != nil || s.base == nil {
			return err
		}
	}
	for attempt := 0; ; attempt++ {
		if s.base.Annotations[StateAnnotation] == string(state) {
			return nil
		}
		patched := s.base.DeepCopy()
		if patched.Annotations == nil {
			patched.Annotations = map[string]string{}
		}
		patched.Annotations[StateAnnotation] = string(state)
		err := s.Client.Patch(ctx, patched, client.MergeFromWithOptions(s.base, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil:
			s.base = patched
			s.Unsaved.forget(s.Name)
			return nil
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsForbidden(err):
			s.Unsaved.keep(s.Name, policy.Status)
			return fmt.Errorf("save the graduation of %s on the CRD: %w", s.Name, err)
		case !apierrors.IsConflict(err) || attempt >= conflictRetries:
			return fmt.Errorf("save the graduation of %s on the CRD: %w", s.Name, err)
		}
		fresh := &apiextensionsv1.CustomResourceDefinition{}
		if err := s.Reader.Get(ctx, client.ObjectKey{Name: s.Name}, fresh); err != nil {
			return fmt.Errorf("save the graduation of %s: reread after a conflict: %w", s.Name, err)
		}
		if fresh.Annotations[StateAnnotation] != s.base.Annotations[StateAnnotation] {
			return apierrors.NewConflict(schema.GroupResource{Group: apiextensionsv1.GroupName, Resource: "customresourcedefinitions"},
				s.Name, fmt.Errorf("annotation %s was written by someone else since this graduation read it", StateAnnotation))
		}
		s.base = fresh
	}
}
