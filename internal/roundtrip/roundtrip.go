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

// Package roundtrip proves, before a storage migration writes anything,
// that a CRD's conversion keeps every object's content: for each old
// version objects are still stored in, an object read at that version (A)
// is compared with the same object converted old -> storage version -> old
// (B). A field of A that B lacks or holds another value at is lost, and
// the migration would make the loss permanent.
//
// Which objects: every object, by default. One paged pass reads the
// objects whole at the old version; each page is converted there and back
// in batched ConversionReviews (several in flight) while the next page is
// read, so the proof costs one read of the population and two conversions
// per object in batches of reviewBatch. Options.Sample opts out for a
// sample that covers every value class present (an object is kept when it
// brings a class no kept object brings: per path its zero value, an
// explicit null, each value of an enum-like path and each value of an enum
// the schema declares, each JSON type of the path (both forms of an
// int-or-string), the smallest and largest number, the longest string, an
// empty, a one-item and the longest list or map; see Sample.Add).
//
// Where B comes from: the CRD's conversion webhook asked directly with the
// ConversionReviews the API server would send, in both directions, each
// answer pruned and defaulted by the schema of its version as the API
// server does on reading (with strategy None only these apply). Once the
// target is the storage version, the class sample is also proven by a
// dryRun=All no-op write of the object at its old version, the
// migration's own write, which the API server encodes to the storage
// version and decodes back: the faithful path, on the objects that carry
// every class, beside the emulated one on every object. When this process
// cannot reach the webhook (a Service's name from outside the cluster)
// after the switch, every object is proven by the dry run instead.
//
// What it cannot see: a conversion whose output depends on anything but
// the object (the time, another object, the webhook's own state), an
// object created or changed after the pass read it (the migration proves
// those itself before writing them), and, with a sample, a loss that
// depends on a value outside the classes (one of many values of a path, a
// combination of values at two paths). Prove writes nothing.
package roundtrip

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/migration"
)

// MaxExamples is how many objects a Loss names.
const MaxExamples = 5

// Options say what to prove.
type Options struct {
	// Target is the version the graduation makes the storage version.
	Target string
	// AcceptLoss lists the field paths (Wildcard for list items, see
	// ValidPath) whose loss the policy's authors accept: such a loss is
	// reported in Accepted, not in Losses. A path accepts the paths under it.
	AcceptLoss []string
	// Sample proves a sample covering every value class (see Sample.Add)
	// instead of every object: faster on a large population, blind to a
	// loss that only a value outside the classes triggers.
	Sample bool
	// PageSize is the LIST page size; paging.DefaultPageSize when 0.
	PageSize int64
	// WriteTo is where the dry-run no-op writes go, as the migration's
	// writes will (the object or its /status).
	WriteTo migration.WriteTarget
	// Concurrency bounds the dry-run writes in flight; 8 when 0.
	Concurrency int
	// Source, when set, is where B comes from whatever the storage version:
	// SourceWebhook (or SourcePruning, the same for strategy None) asks the
	// conversion directly; SourceDryRun dry-runs the write of each object
	// proven. Empty picks by the scope and the storage version (see Prove).
	Source Source
	// WebhookTransport, when set, wraps the transport of the requests to
	// the conversion webhook (to observe them, or to reach a service
	// through a proxy).
	WebhookTransport func(http.RoundTripper) http.RoundTripper
}

// Source says where B, the round-tripped object, came from.
type Source string

const (
	// SourceDryRun is a dryRun=All no-op write at the old version, once the
	// target is the storage version.
	SourceDryRun Source = "DryRun"
	// SourceWebhook is the CRD's conversion webhook asked directly, with
	// each version's pruning and defaulting.
	SourceWebhook Source = "Webhook"
	// SourcePruning is strategy None asked directly: only each version's
	// pruning and defaulting.
	SourcePruning Source = "Pruning"
)

// Result is what Prove found.
type Result struct {
	// CRD is the CRD's name, Kind its objects' kind.
	CRD  string `json:"crd"`
	Kind string `json:"kind"`
	// Target is the version proven through.
	Target string `json:"target"`
	Source Source `json:"source"`
	// Every is true when every object was proven, false for a sample.
	Every bool `json:"every"`
	// Versions has one entry per old version proven.
	Versions []VersionResult `json:"versions"`
	// Unserved are old versions objects are stored in that are not served,
	// so cannot be read at, and were not proven.
	Unserved []string `json:"unserved,omitempty"`
}

// VersionResult is the proof of one old version.
type VersionResult struct {
	// Version is the old version: the round trip is Version -> Target ->
	// Version.
	Version string `json:"version"`
	// Listed is the number of objects the pass read; Sampled how many of
	// them were round-tripped and compared (all of them when every object
	// is proven); DryRun how many of those the dry-run write proved too
	// (the class sample, once the target stores).
	Listed  int `json:"listed"`
	Sampled int `json:"sampled"`
	DryRun  int `json:"dryRun,omitempty"`
	// Paths is the number of distinct field paths the objects carry, every
	// one carried by at least one sampled object.
	Paths int `json:"paths"`
	// Losses are the paths lost, Accepted those lost but accepted, sorted.
	Losses   []Loss `json:"losses,omitempty"`
	Accepted []Loss `json:"accepted,omitempty"`
}

// Loss is one field path that the round trip loses.
type Loss struct {
	// Path is the field path, Wildcard for list items.
	Path string `json:"path"`
	// Objects is how many sampled objects lose it; Carriers how many listed
	// objects carry it (for a path above the carried ones, such as /status
	// when all of status is gone, the most that carry one path under it).
	Objects  int `json:"objects"`
	Carriers int `json:"carriers"`
	// Examples name up to MaxExamples objects (namespace/name) that lose it.
	Examples []string `json:"examples"`
}

// Lossless reports whether no old version loses a path that is not
// accepted.
func (r Result) Lossless() bool {
	for _, v := range r.Versions {
		if len(v.Losses) > 0 {
			return false
		}
	}
	return true
}

// LostPaths are the paths lost and not accepted, of every version, each
// once, sorted.
func (r Result) LostPaths() []string {
	set := map[string]struct{}{}
	for _, v := range r.Versions {
		for _, l := range v.Losses {
			set[l.Path] = struct{}{}
		}
	}
	return sortedKeys(set)
}

// AcceptedLosses are the accepted losses of every version.
func (r Result) AcceptedLosses() []Loss {
	var out []Loss
	for _, v := range r.Versions {
		out = append(out, v.Accepted...)
	}
	return out
}

// Message is one sentence a person reads in a condition or a test failure,
// such as "v1 -> v2 -> v1 loses /status/conditions on 54 of 54 CronJobs
// (default/a, default/b)" ("of 54 sampled CronJobs" for a sample).
func (r Result) Message() string {
	kinds := plural(r.Kind)
	if !r.Every {
		kinds = "sampled " + kinds
	}
	var lossy, fine []string
	for _, v := range r.Versions {
		trip := fmt.Sprintf("%s -> %s -> %s", v.Version, r.Target, v.Version)
		if len(v.Losses) == 0 {
			s := fmt.Sprintf("%s keeps all %d field paths of %d %s", trip, v.Paths, v.Sampled, kinds)
			if len(v.Accepted) > 0 {
				s += fmt.Sprintf(" but the accepted %s", describe(v.Accepted, v.Sampled, kinds))
			}
			fine = append(fine, s)
			continue
		}
		lossy = append(lossy, fmt.Sprintf("%s loses %s", trip, describe(v.Losses, v.Sampled, kinds)))
	}
	switch {
	case len(lossy) > 0:
		return strings.Join(lossy, "; ")
	case len(fine) > 0:
		return strings.Join(fine, "; ")
	}
	return fmt.Sprintf("no %s stored at a version other than %s: nothing to prove", plural(r.Kind), r.Target)
}

func describe(losses []Loss, compared int, kinds string) string {
	parts := make([]string, len(losses))
	for i, l := range losses {
		parts[i] = fmt.Sprintf("%s on %d of %d %s (%s)", l.Path, l.Objects, compared, kinds, strings.Join(l.Examples, ", "))
	}
	return strings.Join(parts, ", ")
}

// plural is a kind's plural for a sentence: CronJobs, Policies, Boxes.
func plural(kind string) string {
	lower := strings.ToLower(kind)
	switch {
	case kind == "":
		return "objects"
	case strings.HasSuffix(lower, "y") && !strings.ContainsAny(lower[max(0, len(lower)-2):len(lower)-1], "aeiou"):
		return kind[:len(kind)-1] + "ies"
	case strings.HasSuffix(lower, "s"), strings.HasSuffix(lower, "x"), strings.HasSuffix(lower, "ch"), strings.HasSuffix(lower, "sh"):
		return kind + "es"
	}
	return kind + "s"
}

// Prove proves, for each old version objects of crd are still stored in
// (status.storedVersions but opts.Target) and served, that a round trip
// through opts.Target keeps every object's content (or a sample's, with
// opts.Sample). It picks B's source by the scope and by whether opts.Target
// is already the storage version (see Source and the package doc). An
// error (a webhook unreachable before the switch, a LIST refused) says the
// proof could not be made, not that the conversion loses anything. Prove
// writes nothing.
//
// Once the target stores, call it after the storage switch settled (the
// wait the migration takes): an API server still writing the old version
// would round-trip nothing in a dry run. The dynamic client needs list and
// patch (the dry run) on the CRD's objects at the old versions; this
// process should reach the conversion webhook as the API server does.
func Prove(ctx context.Context, dyn dynamic.Interface, crd *apiextensionsv1.CustomResourceDefinition, opts Options) (Result, error) {
	r := Result{CRD: crd.Name, Kind: crd.Spec.Names.Kind, Target: opts.Target, Every: !opts.Sample}
	if !slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == opts.Target }) {
		return r, fmt.Errorf("CRD %s has no version %s", crd.Name, opts.Target)
	}
	for _, p := range opts.AcceptLoss {
		if !ValidPath(p) {
			return r, fmt.Errorf("accepted loss %q is not a field path such as /spec/items/*/name", p)
		}
	}
	old, unserved := oldVersions(crd, opts.Target)
	r.Unserved = unserved
	stores := graduation.StorageVersion(crd) == opts.Target
	direct := SourcePruning
	if crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
		direct = SourceWebhook
	}
	switch {
	case opts.Source != "":
		r.Source = opts.Source
	case opts.Sample && stores:
		r.Source = SourceDryRun
	default:
		r.Source = direct
	}
	var conv *converter
	if r.Source != SourceDryRun && len(old) > 0 {
		var err error
		if conv, err = newConverter(crd, opts.WebhookTransport); err != nil {
			return r, err
		}
		defer conv.close()
	}
	for _, v := range old {
		objects := dyn.Resource(graduation.ResourceAt(crd, v))
		dry := dryRun{objects: objects, writeTo: opts.WriteTo, concurrency: cmp.Or(opts.Concurrency, 8)}
		p := proof{version: v, opts: opts, src: dry, enums: declaredEnums(crd, v)}
		if conv != nil {
			p.src = converted{conv: conv, old: v, target: opts.Target}
			if stores {
				// The faithful path on the class sample, beside the
				// emulated one on every object; and the dry run of every
				// object where this process cannot reach the webhook.
				p.check, p.fallback = dry, dry
			}
		}
		vr, err := p.run(ctx, objects)
		if err != nil {
			return r, fmt.Errorf("prove %s -> %s -> %s of %s: %w", v, opts.Target, v, crd.Name, err)
		}
		if p.fellBack {
			r.Source = SourceDryRun
		}
		r.Versions = append(r.Versions, vr)
	}
	return r, nil
}

// declaredEnums are the enums the schema of crd's version declares.
func declaredEnums(crd *apiextensionsv1.CustomResourceDefinition, version string) map[string]map[any]struct{} {
	for _, v := range crd.Spec.Versions {
		if v.Name == version && v.Schema != nil {
			return DeclaredEnums(v.Schema.OpenAPIV3Schema)
		}
	}
	return nil
}

// oldVersions are the versions objects may still be stored in, but target:
// those served, which can be proven, and those not.
func oldVersions(crd *apiextensionsv1.CustomResourceDefinition, target string) (served, unserved []string) {
	for _, name := range crd.Status.StoredVersions {
		if name == target {
			continue
		}
		i := slices.IndexFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == name })
		if i >= 0 && crd.Spec.Versions[i].Served {
			served = append(served, name)
		} else {
			unserved = append(unserved, name)
		}
	}
	return served, unserved
}

// proof is the proof of one old version.
type proof struct {
	version string
	opts    Options
	// src round-trips the objects proven: every object, or the sample.
	src source
	// check, when set, round-trips the class sample too (the dry run once
	// the target stores); fallback replaces src when src cannot reach the
	// webhook, and fellBack says it did.
	check, fallback source
	fellBack        bool
	// enums are the schema's declared enums (Sample's classes).
	enums map[string]map[any]struct{}
}

// run proves the objects at p.version: every object page by page (each
// page round-tripped while the next is read), or a sample.
func (p *proof) run(ctx context.Context, objects dynamic.ResourceInterface) (VersionResult, error) {
	t := newTally(p.opts.AcceptLoss)
	var s *Sample
	var err error
	if p.opts.Sample {
		s, err = takeSample(ctx, NewSampleFor(p.enums), objects, p.opts.PageSize)
		if err == nil {
			err = p.roundTrip(ctx, t, s.Objects())
		}
	} else {
		s = NewSampleFor(p.enums)
		s.countOnly = p.check == nil
		err = eachPageAhead(ctx, objects, p.opts.PageSize, func(page []unstructured.Unstructured) error {
			objs := make([]*unstructured.Unstructured, len(page))
			for i := range page {
				s.Add(&page[i])
				objs[i] = &page[i]
			}
			return p.roundTrip(ctx, t, objs)
		})
	}
	if err != nil {
		return VersionResult{}, err
	}
	vr := VersionResult{Version: p.version, Listed: s.Listed, Sampled: t.compared, Paths: s.Paths()}
	if p.check != nil && !p.opts.Sample && !p.fellBack {
		checked := newTally(p.opts.AcceptLoss)
		pairs, err := p.check.roundTrip(ctx, s.Objects())
		if err != nil {
			return VersionResult{}, err
		}
		checked.add(pairs)
		t.merge(checked)
		vr.DryRun = checked.compared
	}
	vr.Losses, vr.Accepted = t.losses(s.Carriers)
	return vr, nil
}

// roundTrip round-trips objs through the source and tallies them, falling
// back once to p.fallback when the webhook cannot be reached.
func (p *proof) roundTrip(ctx context.Context, t *tally, objs []*unstructured.Unstructured) error {
	pairs, err := p.src.roundTrip(ctx, objs)
	if err != nil && p.fallback != nil && !p.fellBack && errors.Is(err, errUnreachable) {
		p.src, p.fellBack = p.fallback, true
		pairs, err = p.src.roundTrip(ctx, objs)
	}
	t.add(pairs)
	return err
}

// tally counts the lost paths of the pairs compared.
type tally struct {
	accept   []string
	compared int
	lost     map[string]*Loss
}

func newTally(accept []string) *tally {
	return &tally{accept: accept, lost: map[string]*Loss{}}
}

func (t *tally) add(pairs []pair) {
	for _, p := range pairs {
		t.compared++
		for _, path := range Compare(p.a.Object, p.b.Object) {
			l := t.lost[path]
			if l == nil {
				l = &Loss{Path: path}
				t.lost[path] = l
			}
			l.Objects++
			if len(l.Examples) < MaxExamples {
				l.Examples = append(l.Examples, objectName(p.a))
			}
		}
	}
}

// merge adds the paths only o lost: a path both lost keeps t's count
// (o's objects are among t's).
func (t *tally) merge(o *tally) {
	for path, l := range o.lost {
		if _, ok := t.lost[path]; !ok {
			t.lost[path] = l
		}
	}
}

// losses splits the lost paths into those not accepted and those accepted,
// each sorted by path, with the number of listed objects carrying each.
func (t *tally) losses(carriers map[string]int) (losses, accepted []Loss) {
	for path, l := range t.lost {
		l.Carriers = carriersUnder(carriers, path)
		if Accepts(t.accept, path) {
			accepted = append(accepted, *l)
		} else {
			losses = append(losses, *l)
		}
	}
	byPath := func(s []Loss) { sort.Slice(s, func(i, j int) bool { return s[i].Path < s[j].Path }) }
	byPath(losses)
	byPath(accepted)
	return losses, accepted
}

// carriersUnder is how many listed objects carry path, or, for a path
// above the carried ones (all of /status lost), the most that carry one
// path under it, or, for a path inside a carried value (a field of a JSON
// annotation), how many carry that value.
func carriersUnder(carriers map[string]int, path string) int {
	if n, ok := carriers[path]; ok {
		return n
	}
	most := 0
	for p, n := range carriers {
		if strings.HasPrefix(p, path+"/") || strings.HasPrefix(path, p+"/") {
			most = max(most, n)
		}
	}
	return most
}

// maxStatusLosses bounds each list of RoundTripStatus.
const maxStatusLosses = graduatorv1alpha1.MaxLossesListed

// Status is r as a CRDVersionPolicy's status.roundTrip, for the CRD
// generation proven, at time now.
func (r Result) Status(crdGeneration int64, now metav1.Time) graduatorv1alpha1.RoundTripStatus {
	s := graduatorv1alpha1.RoundTripStatus{CRDGeneration: crdGeneration, Target: r.Target, Source: string(r.Source),
		Lossless: r.Lossless(), ProvedAt: &now, Scope: graduatorv1alpha1.RoundTripProofSample}
	if r.Every {
		s.Scope = graduatorv1alpha1.RoundTripProofEvery
	}
	field := func(version string, l Loss) graduatorv1alpha1.FieldLoss {
		return graduatorv1alpha1.FieldLoss{Path: l.Path, Version: version, Objects: int64(l.Objects),
			Carriers: int64(l.Carriers), Examples: l.Examples}
	}
	for _, v := range r.Versions {
		s.Versions = append(s.Versions, v.Version)
		s.Sampled += int64(v.Sampled)
		s.DryRun += int64(v.DryRun)
		s.Paths += int64(v.Paths)
		for _, l := range v.Losses {
			if len(s.Losses) < maxStatusLosses {
				s.Losses = append(s.Losses, field(v.Version, l))
			}
		}
		for _, l := range v.Accepted {
			if len(s.Accepted) < maxStatusLosses {
				s.Accepted = append(s.Accepted, field(v.Version, l))
			}
		}
	}
	return s
}

// OptionsFor are the Options a policy's spec.migration asks for, through
// target. The proof reads in pages of paging.DefaultPageSize, not of the
// policy's pageSize: that is the engine's page (its LIST of metadata and
// its writers' batch), and the proof's read of whole objects is measured
// faster in larger pages.
func OptionsFor(m graduatorv1alpha1.MigrationSettings, target string) Options {
	return Options{Target: target, AcceptLoss: m.AcceptLoss, Sample: m.RoundTripProof == graduatorv1alpha1.RoundTripProofSample,
		WriteTo: m.WriteTo}
}
