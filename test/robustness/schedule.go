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

// Package robustness draws the fault schedules of the robustness suite from
// a seed, and tells the stage of a graduation from what a person can see
// of it (the operator's log and the policy's status). Nothing here does
// I/O: the same seed is the same schedule, which is what makes a failing
// seed replay.
package robustness

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/driver"
	"github.com/graduator/graduator/internal/failpoint"
)

// Stage is a moment of a graduation a fault can meet.
type Stage string

const (
	StagePending Stage = "pending"
	// StagePreflight is the start of the Preflight step before the storage
	// switch: a sample read at the target version and its dry-run writes.
	StagePreflight Stage = "preflight"
	// StageProof is the rest of that step, once the sample's dry-run writes
	// are done: the round-trip proof through the conversion webhook.
	StageProof Stage = "proof"
	// StageSettling is the storage switch, the settle delay after it, and
	// the checks before the first write (the sample and the proof again, by
	// dry run, now that the CRD stores the target).
	StageSettling Stage = "switch settling"
	// StageMainPass is the engine's pass over every object.
	StageMainPass Stage = "main pass"
	// StageSweep is the catch-up sweep over what was written meanwhile.
	StageSweep Stage = "sweep"
	// StagePrune is the prune of status.storedVersions.
	StagePrune Stage = "prune"
	// StageRetire is the deprecation, its grace period and the unserving.
	StageRetire    Stage = "retire"
	StageGraduated Stage = "graduated"
)

// Stages are the stages faults are aimed at, in the order a graduation
// passes them.
var Stages = []Stage{StagePreflight, StageProof, StageSettling, StageMainPass, StageSweep, StagePrune, StageRetire}

// StageRank orders every stage; pending first, graduated last.
func StageRank(s Stage) int {
	switch s {
	case StagePending:
		return 0
	case StageGraduated:
		return len(Stages) + 1
	}
	return slices.Index(Stages, s) + 1
}

// StageOf tells the stage from the last step the operator logged as started
// ("step started", step=...), whether it switched the storage before, the
// dry-run writes of objects the API server received from it since that step
// started, and the policy's status (nil: not read yet).
func StageOf(lastStep string, switched bool, dryRuns int, status *graduatorv1alpha1.CRDVersionPolicyStatus) Stage {
	if status != nil && status.Phase == graduatorv1alpha1.PhaseGraduated {
		return StageGraduated
	}
	switch lastStep {
	case "Preflight":
		switch {
		case switched:
			return StageSettling
		case dryRuns >= driver.PreflightSample:
			return StageProof
		}
		return StagePreflight
	case "SwitchStorage":
		return StageSettling
	case "Migrate":
		if status != nil && status.Migration != nil && status.Migration.CatchUp {
			return StageSweep
		}
		return StageMainPass
	case "Prune":
		return StagePrune
	case "Deprecate", "Unserve", "CleanupManagedFields":
		return StageRetire
	}
	return StagePending
}

// Kind is a fault of the menu.
type Kind string

const (
	// KillManager SIGKILLs the manager process and starts it again after
	// Duration (its leader election lease is deleted, as if expired).
	KillManager Kind = "kill-manager"
	// RestartAPIServer stops kube-apiserver gracefully and starts it again.
	RestartAPIServer Kind = "apiserver-restart"
	// WebhookDown stops the conversion webhook for Duration.
	WebhookDown Kind = "webhook-down"
	// WebhookSlow holds every new connection to the webhook for Delay,
	// for Duration.
	WebhookSlow Kind = "webhook-slow"
	// WebhookFlap stops and starts the webhook every Delay, for Duration.
	WebhookFlap Kind = "webhook-flap"
	// DenyUpdates denies every UPDATE of the objects with a
	// ValidatingAdmissionPolicy for Duration.
	DenyUpdates Kind = "deny-updates"
	// Compaction compacts etcd at its current revision Count times, Delay
	// apart: continue tokens and resourceVersions of before expire.
	Compaction Kind = "etcd-compaction"
	// PausePolicy pauses the policy for Duration, then resumes it.
	PausePolicy Kind = "policy-pause"
	// PriorityEdit switches the policy's priority (Background <-> Full):
	// a spec change that interrupts the running migration.
	PriorityEdit Kind = "policy-priority"
	// LaggingAPIServer is a second API server that learns the new storage
	// version late: for Duration after the storage switch it stores the
	// objects it writes in the old version, one every Delay. Duration is
	// within the policy's settle delay, the bound the settle delay states.
	LaggingAPIServer Kind = "apiserver-lag"
	// LeaderMove SIGKILLs the replica of two that holds the leader
	// election lease and leaves the lease to expire: the other takes over.
	// The killed replica starts again after Duration, as the standby.
	LeaderMove Kind = "leader-move"
	// CRDAddVersion adds a version (v1, served, not stored) to the CRD, as
	// its next release would: nothing the graduation should restart for.
	CRDAddVersion Kind = "crd-add-version"
	// CRDStorageBack sets the CRD's storage version back to the old one
	// (and serves it again), as applying the old manifest would: a change
	// that asks the graduation to start over.
	CRDStorageBack Kind = "crd-storage-back"
	// KillEmbedder SIGKILLs the operator that embeds crdmigrate (the
	// embed suite's binary, which graduates the CRD in these runs instead
	// of the manager) and starts it again after Duration.
	KillEmbedder Kind = "kill-embedder"
	// NearQuota holds etcd's database near its space quota: ballast is
	// written before the run starts, leaving Headroom bytes under the
	// quota, and removed (deleted, compacted, defragmented) once the run
	// reaches Until. Only the quota rig (a small etcd quota, told to the
	// policy) draws it, with WithNearQuota: it is not in Kinds, so the
	// other rigs' seeds draw what they drew before.
	NearQuota Kind = "etcd-near-quota"
)

// Kinds is the menu.
var Kinds = []Kind{KillManager, RestartAPIServer, WebhookDown, WebhookSlow, WebhookFlap, DenyUpdates, Compaction, PausePolicy,
	PriorityEdit, LaggingAPIServer, LeaderMove, CRDAddVersion, CRDStorageBack, KillEmbedder}

// Door is what graduates the CRD in a run.
type Door string

const (
	// DoorOperator is the manager (cmd/manager) with a CRDVersionPolicy.
	DoorOperator Door = "operator"
	// DoorEmbedded is an operator embedding crdmigrate: the CRD's new
	// release stores v1beta1 (the run sets the storage flag, as applying
	// it would) and crdmigrate migrates and prunes; there is no policy, no
	// preflight before a switch and no retirement.
	DoorEmbedded Door = "embedded"
)

// embeddedOdds: one run in embeddedOdds is an embedded one.
const embeddedOdds = 6

// KindsOf is the menu of a door: an embedded run has no policy to pause or
// edit, no manager replicas, and a storage version set back would be its
// new target (GitOps), not a fault; a SIGKILL of it comes first.
func KindsOf(d Door) []Kind {
	if d == DoorEmbedded {
		return []Kind{RestartAPIServer, WebhookDown, WebhookSlow, WebhookFlap, DenyUpdates, Compaction, LaggingAPIServer, CRDAddVersion}
	}
	return slices.DeleteFunc(slices.Clone(Kinds), func(k Kind) bool { return k == KillEmbedder })
}

// EmbeddedStages are the stages of an embedded run: the storage was
// switched before it starts.
var EmbeddedStages = []Stage{StageSettling, StageMainPass, StageSweep, StagePrune}

// StagesOf are the stages a fault of the kind is aimed at. An API server
// that has not learned the storage version matters only once the storage
// switched, and its lag must end within the settle delay (what the policy's
// settleDelay promises to cover): it is aimed at the switch's settling.
// Setting the storage version back is one once the switch was written.
func StagesOf(k Kind) []Stage {
	switch k {
	case KillEmbedder:
		return EmbeddedStages
	case LaggingAPIServer:
		return []Stage{StageSettling}
	case CRDStorageBack:
		return Stages[slices.Index(Stages, StageSettling):]
	}
	return Stages
}

// ReadyBound is how long after a fault of the kind ended the policy may
// take to be Ready, beyond the work left (WorkBound). A failed step is
// retried after a backoff of 5 s doubling, and a blocked preflight after
// 30 s: a fault that blocks the preflight (webhook, denial) costs up to that
// once it ends.
func ReadyBound(k Kind) time.Duration {
	switch k {
	case KillManager, KillEmbedder:
		return 45 * time.Second // a start, the lease, a resume
	case RestartAPIServer:
		return 90 * time.Second // the manager reconnects; a stalled step backs off
	case WebhookDown, WebhookSlow, WebhookFlap, DenyUpdates:
		return 75 * time.Second // a blocked preflight waits 30 s; a stalled step backs off
	case LeaderMove:
		return 60 * time.Second // the lease expires (15 s), the standby takes over and resumes
	case CRDStorageBack:
		return 75 * time.Second // the graduation again (Schedule.ReadyBound adds its work); a blocked step backs off
	}
	return 30 * time.Second
}

// Fault is one fault of a schedule.
type Fault struct {
	Kind Kind
	// Stage is the stage the fault is aimed at; AtHandled, for the main
	// pass, how many objects the run has handled first; After how long
	// after the stage is seen the fault comes.
	Stage     Stage
	AtHandled int64
	After     time.Duration
	// Duration is how long the fault lasts (the restart delay of a kill).
	Duration time.Duration
	// Delay is the connection delay of a slow webhook, the half-period of a
	// flapping one, the spacing of compactions.
	Delay time.Duration
	// Count is how many compactions.
	Count int
	// Headroom is the bytes etcd-near-quota leaves under etcd's quota, and
	// Until the stage it is removed at.
	Headroom int64
	Until    Stage
}

func (f Fault) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s@%s", f.Kind, f.Stage)
	if f.Stage == StageMainPass {
		fmt.Fprintf(&b, "(handled>=%d)", f.AtHandled)
	}
	if f.After > 0 {
		fmt.Fprintf(&b, "+%s", f.After)
	}
	switch f.Kind {
	case WebhookSlow:
		fmt.Fprintf(&b, " %s/conn for %s", f.Delay, f.Duration)
	case LaggingAPIServer:
		fmt.Fprintf(&b, " a write every %s for %s", f.Delay, f.Duration)
	case WebhookFlap:
		fmt.Fprintf(&b, " every %s for %s", f.Delay, f.Duration)
	case Compaction:
		fmt.Fprintf(&b, " x%d every %s", f.Count, f.Delay)
	case NearQuota:
		fmt.Fprintf(&b, " %.1fMiB under the quota until %s", float64(f.Headroom)/(1<<20), f.Until)
	case RestartAPIServer, PriorityEdit, CRDAddVersion, CRDStorageBack:
	default:
		fmt.Fprintf(&b, " for %s", f.Duration)
	}
	return b.String()
}

// Size is how big each run is.
type Size struct {
	Name string
	// Objects created before the graduation.
	Objects int
	// MaxFaults per run (at least one).
	MaxFaults int
}

// Schedule is what one seed draws: the policy's knobs, the concurrent
// client's pace and the faults, in the order they come.
type Schedule struct {
	Seed        uint64
	Size        Size
	Door        Door
	PageSize    int64
	Concurrency int32
	QPS         int32
	SettleDelay time.Duration
	// RetireAfter is the grace period between deprecating and unserving
	// the old version.
	RetireAfter time.Duration
	// ClientEvery is the pause between two writes of the concurrent client.
	ClientEvery time.Duration
	Faults      []Fault
	// Paced is how long the run may wait for etcd's compactions beyond
	// its work (WithNearQuota: etcd's space budget paces the pass).
	Paced time.Duration
}

// Aim is a fault kind aimed at a stage: a cell of the menu.
type Aim struct {
	Kind  Kind
	Stage Stage
}

// Cover is every cell of the menu (each kind at each stage it can be aimed
// at), one or two to a seed: seed i, from 1 to len(Cover()), aims its
// faults at Cover()[i-1], so that as many seeds aim a fault of every kind at
// every stage once (their moments and sizes are still drawn). Later seeds
// draw kinds and stages at random. The faults of a schedule come one after
// the other, so a fault aimed at a short stage (shortStages) that waits for
// another to end often finds that stage over: a short stage comes first in
// its seed, or second only after an instant fault, or alone (pairUp). The
// embedded door's SIGKILLs come last.
func Cover() [][]Aim {
	var out, left [][]Aim
	for _, k := range KindsOf(DoorOperator) {
		pairs, rest := pairUp(cellsOf(k, StagesOf(k)))
		out, left = append(out, pairs...), append(left, rest...)
	}
	// What is left, in stage order: the retirements pair with the first
	// prunes.
	rest := slices.Concat(left...)
	slices.SortStableFunc(rest, func(a, b Aim) int { return cmp.Compare(StageRank(a.Stage), StageRank(b.Stage)) })
	pairs, leftover := pairUp(rest)
	out = append(append(out, pairs...), leftover...)
	pairs, leftover = pairUp(cellsOf(KillEmbedder, StagesOf(KillEmbedder)))
	return append(append(out, pairs...), leftover...)
}

// shortStages last a few milliseconds at the sizes run, or the second the
// failpoints hold them (preflight, proof, sweep, prune).
var shortStages = []Stage{StagePreflight, StageProof, StageSweep, StagePrune}

// instant kinds are over once made (an edit): the next fault can come at
// once.
func instant(k Kind) bool { return k == PriorityEdit || k == CRDAddVersion }

// outlastsTheRest: a fault that lasts seconds while the graduation goes on
// often outlasts every later stage, so it has no second: a slow webhook
// (only new connections are held, and the API server keeps its
// connections), a flapping one (the graduation goes through between its
// outages), and a webhook down from the sweep on (the graduation needs no
// conversion any more: it writes little or nothing at 120 objects). A
// first 50-seed run with the short-stage rule alone met webhook-down, -slow
// and -flap at the retirement only once the policy had graduated; a second
// one, with the later webhook faults alone, met webhook-slow at neither the
// settling nor the main pass; a third, with the slow webhook alone too, met
// webhook-flap at the prune when it came after a flap in the proof. The
// cover is then 52 seeds.
func outlastsTheRest(a Aim) bool {
	return a.Kind == WebhookSlow || a.Kind == WebhookFlap || (a.Kind == WebhookDown && StageRank(a.Stage) >= StageRank(StageSweep))
}

func cellsOf(k Kind, stages []Stage) []Aim {
	cells := make([]Aim, len(stages))
	for i, st := range stages {
		cells[i] = Aim{k, st}
	}
	return cells
}

// pairUp pairs cells given in stage order, first come first paired, so
// that the second of a pair is at a later stage and is a short stage only
// after an instant fault; the cells it cannot pair come back one to a seed.
func pairUp(cells []Aim) (pairs, rest [][]Aim) {
	var open []Aim
	for _, c := range cells {
		i := slices.IndexFunc(open, func(first Aim) bool {
			return StageRank(first.Stage) < StageRank(c.Stage) && (instant(first.Kind) || !slices.Contains(shortStages, c.Stage)) &&
				!outlastsTheRest(first)
		})
		if i < 0 {
			open = append(open, c)
			continue
		}
		pairs = append(pairs, []Aim{open[i], c})
		open = slices.Delete(open, i, i+1)
	}
	for _, c := range open {
		rest = append(rest, []Aim{c})
	}
	return pairs, rest
}

// Draw draws the schedule of seed.
func Draw(seed uint64, size Size) Schedule {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := Schedule{
		Seed: seed, Size: size,
		PageSize:    pick(r, []int64{25, 50, 100}),
		Concurrency: pick(r, []int32{2, 4, 16}),
		QPS:         pick(r, []int32{50, 100, 200}),
		SettleDelay: between(r, time.Second, 4*time.Second, 100*time.Millisecond),
		RetireAfter: between(r, 2*time.Second, 6*time.Second, 100*time.Millisecond),
		ClientEvery: between(r, 20*time.Millisecond, 120*time.Millisecond, 10*time.Millisecond),
	}
	s.Door = DoorOperator
	if cover := Cover(); seed >= 1 && seed <= uint64(len(cover)) {
		for _, aim := range cover[seed-1] {
			if aim.Kind == KillEmbedder {
				s.Door = DoorEmbedded
			}
			s.Faults = append(s.Faults, drawFault(r, size, s.SettleDelay, aim))
		}
	} else {
		if r.IntN(embeddedOdds) == 0 {
			s.Door = DoorEmbedded
		}
		n := 1 + r.IntN(max(size.MaxFaults, 1))
		for i := range n {
			kind := pick(r, KindsOf(s.Door))
			if s.Door == DoorEmbedded && i == 0 {
				kind = KillEmbedder
			}
			s.Faults = append(s.Faults, drawFault(r, size, s.SettleDelay, Aim{kind, pick(r, stagesIn(kind, s.Door))}))
		}
	}
	slices.SortStableFunc(s.Faults, func(a, b Fault) int {
		if c := cmp.Compare(StageRank(a.Stage), StageRank(b.Stage)); c != 0 {
			return c
		}
		return cmp.Compare(a.AtHandled, b.AtHandled)
	})
	return s
}

// stagesIn are the stages a fault of the kind can be aimed at in a run of
// the door.
func stagesIn(kind Kind, door Door) []Stage {
	stages := StagesOf(kind)
	if door == DoorEmbedded {
		stages = slices.DeleteFunc(slices.Clone(stages), func(s Stage) bool { return !slices.Contains(EmbeddedStages, s) })
	}
	return stages
}

// drawFault draws the moment and the size of a fault aimed as aim.
func drawFault(r *rand.Rand, size Size, settle time.Duration, aim Aim) Fault {
	f := Fault{Kind: aim.Kind, Stage: aim.Stage}
	switch f.Stage {
	case StageMainPass:
		f.AtHandled = int64(r.IntN(max(size.Objects*9/10, 1)))
	case StagePreflight, StagePrune:
		// A few milliseconds at the sizes run: a fault aimed at them comes
		// as soon as they are seen, or it meets the next stage.
	default:
		f.After = between(r, 0, 100*time.Millisecond, 10*time.Millisecond)
	}
	switch f.Kind {
	case KillManager, LeaderMove, KillEmbedder:
		f.Duration = between(r, 0, 3*time.Second, 100*time.Millisecond)
	case LaggingAPIServer:
		// Its lag starts when the switch step is seen, before the switch
		// is written, and ends within the settle delay that follows it.
		f.Delay = between(r, 20*time.Millisecond, 200*time.Millisecond, 10*time.Millisecond)
		f.Duration = between(r, 200*time.Millisecond, max(settle-f.After, 200*time.Millisecond), 100*time.Millisecond)
	case WebhookDown, DenyUpdates, PausePolicy:
		f.Duration = between(r, time.Second, 10*time.Second, 100*time.Millisecond)
	case WebhookSlow:
		f.Delay = between(r, 200*time.Millisecond, 3*time.Second, 100*time.Millisecond)
		f.Duration = between(r, 2*time.Second, 10*time.Second, 100*time.Millisecond)
	case WebhookFlap:
		f.Delay = between(r, 200*time.Millisecond, 1500*time.Millisecond, 100*time.Millisecond)
		f.Duration = between(r, 2*time.Second, 10*time.Second, 100*time.Millisecond)
	case Compaction:
		f.Count = 1 + r.IntN(3)
		f.Delay = between(r, 100*time.Millisecond, 2*time.Second, 100*time.Millisecond)
	}
	return f
}

func pick[T any](r *rand.Rand, from []T) T { return from[r.IntN(len(from))] }

// between is a duration in [lo, hi], a multiple of step.
func between(r *rand.Rand, lo, hi, step time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64((hi-lo)/step)+1))*step
}

func (s Schedule) String() string {
	faults := make([]string, len(s.Faults))
	for i, f := range s.Faults {
		faults[i] = f.String()
	}
	return fmt.Sprintf("seed=%d door=%s size=%s objects=%d page=%d writers=%d qps=%d settle=%s retireAfter=%s client=1/%s faults=[%s]",
		s.Seed, s.Door, s.Size.Name, s.Size.Objects, s.PageSize, s.Concurrency, s.QPS, s.SettleDelay, s.RetireAfter, s.ClientEvery,
		strings.Join(faults, "; "))
}

// WorkBound is how long the graduation may take with no fault at all: the
// proof and the pass at the policy's QPS twice over, the settle delay, the
// retirement's grace, and a margin for a shared machine.
func (s Schedule) WorkBound() time.Duration {
	pass := time.Duration(float64(s.Size.Objects) / float64(s.QPS) * float64(time.Second))
	return 30*time.Second + 4*pass + s.SettleDelay + s.RetireAfter + 2*stagePauses*StagePause + s.Paced
}

// StagePause is how long the manager and the embedder, built with their
// failpoints, pause at the start of the three stages that last
// milliseconds at 120 objects (the proof, the sweep and the prune:
// internal/failpoint), so that a fault aimed at one lands inside it rather
// than in the next.
const StagePause = time.Second

// stagePauses is how many stages pause.
const stagePauses = 3

// Failpoints is the processes' GRADUATOR_FAILPOINTS.
func Failpoints() string {
	return fmt.Sprintf("%s=%s,%s=%s,%s=%s", failpoint.Proof, StagePause, failpoint.Sweep, StagePause, failpoint.Prune, StagePause)
}

// Replicas is how many manager processes the run starts: two when a
// leader is to move, one otherwise.
func (s Schedule) Replicas() int {
	for _, f := range s.Faults {
		if f.Kind == LeaderMove {
			return 2
		}
	}
	return 1
}

// ReadyBound is how long after the last fault ended the policy may take to
// be Ready: the work bound and the largest bound of the kinds met.
func (s Schedule) ReadyBound() time.Duration {
	var worst time.Duration
	for _, f := range s.Faults {
		worst = max(worst, ReadyBound(f.Kind))
	}
	return time.Duration(1+s.StorageSetBacks())*s.WorkBound() + worst
}

// StorageSetBacks is how many times the schedule sets the CRD's storage
// version back: each asks for the graduation again.
func (s Schedule) StorageSetBacks() int {
	n := 0
	for _, f := range s.Faults {
		if f.Kind == CRDStorageBack {
			n++
		}
	}
	return n
}

// StorageSetBack is the mark a run puts in its log of phases where it set
// the CRD's storage version back (ordered by resourceVersion with the
// policy's states): a change that asks the graduation to start over.
const StorageSetBack graduatorv1alpha1.Phase = "(CRD storage version set back)"

// PhaseWentBack returns the first phase of phases (in the order shown)
// that came after a later one of the graduation, with the phases up to it;
// "" when none did. Blocked is a stall that may come at any step: it has no
// rank. A StorageSetBack mark allows the graduation to go back once after
// it: the start over it asks for. Not at once: a status the operator
// planned from the CRD before the change may still be written after it.
func PhaseWentBack(phases []graduatorv1alpha1.Phase) (graduatorv1alpha1.Phase, []graduatorv1alpha1.Phase) {
	highest, startOvers := -1, 0
	for i, p := range phases {
		if p == StorageSetBack {
			startOvers++
			continue
		}
		rank, ranked := phaseRank[p]
		if !ranked {
			continue
		}
		if rank < highest {
			if startOvers == 0 {
				return p, phases[:i+1]
			}
			startOvers--
			highest = rank
			continue
		}
		highest = max(highest, rank)
	}
	return "", nil
}

var phaseRank = map[graduatorv1alpha1.Phase]int{
	graduatorv1alpha1.PhasePending: 0, graduatorv1alpha1.PhasePreflight: 1, graduatorv1alpha1.PhaseSwitchingStorage: 2,
	graduatorv1alpha1.PhaseMigrating: 3, graduatorv1alpha1.PhasePruning: 4, graduatorv1alpha1.PhaseRetiring: 5,
	graduatorv1alpha1.PhaseGraduated: 6,
}

// StormBound is the most object writes a run may make: 1.2 x the objects
// there were, plus those the concurrent client touched; that again for
// every time the CRD's storage version was set back (each asks for a pass
// over every object).
func StormBound(objects, touched, setBacks int) int {
	return (1 + setBacks) * (objects*6/5 + touched)
}

// NearQuotaEnds are the stages etcd-near-quota is removed at: after the
// main pass, so that the whole pass writes under it, and as late as the
// graduation's end, so that the retirement's managedFields cleanup, which
// rewrites every object under the same space budget as the migration,
// writes near the quota too (removed as the retirement starts, the ballast
// left the cleanup room enough to write without its budget).
var NearQuotaEnds = []Stage{StageSweep, StagePrune, StageGraduated}

// NearQuotaHeadroom is the range of the headroom etcd-near-quota leaves
// under the quota rig's 64 MiB quota: less than one pass over its padded
// pizzas adds to etcd (about 29 MiB), so that a pass that does not wait for
// compactions fills etcd; more than the last quarter of the quota, which
// the engine leaves to other clients and fragmentation (16 MiB), so that
// the budget the rule gives is a few MiB per compaction rather than its
// floor of 1 MiB, which would make a run several minutes long. With 28 MiB
// left, a pass without a budget took etcd to 63.2 MiB of 64 (seed 13).
var NearQuotaHeadroom = [2]int64{24 << 20, 26 << 20}

// WithNearQuota makes the schedule the quota rig's: etcd-near-quota with
// the seed's other faults (but kill-embedder: the rig graduates through
// the operator) and the seed's pace (page size, writers, QPS, settle
// delay, grace period, client), and a SIGKILL of the manager in the main
// pass when the seed drew none: every run of the rig resumes near the
// ceiling, where a run that follows another must keep its pace (the
// engine's SpaceLedger). Its headroom, end and kill are drawn from the
// seed on a stream of their own. paced is how long a pass may wait for
// compactions (PacedPass); the run may take twice that, as a fault that
// starts the graduation over (the storage set back) asks for a second
// pass.
func WithNearQuota(s Schedule, paced time.Duration) Schedule {
	r := rand.New(rand.NewPCG(s.Seed, 0x71b07a))
	const step = 256 << 10
	f := Fault{Kind: NearQuota, Stage: StagePreflight, Until: pick(r, NearQuotaEnds),
		Headroom: NearQuotaHeadroom[0] + r.Int64N((NearQuotaHeadroom[1]-NearQuotaHeadroom[0])/step+1)*step}
	faults := []Fault{f}
	for _, drawn := range s.Faults {
		if drawn.Kind != KillEmbedder {
			faults = append(faults, drawn)
		}
	}
	if !slices.ContainsFunc(faults, resumesInPass) {
		faults = append(faults, drawFault(r, s.Size, s.SettleDelay, Aim{KillManager, StageMainPass}))
	}
	s.Faults = faults
	s.Door = DoorOperator
	s.Paced = 2 * paced
	// The client's updates rewrite whole (padded) objects outside the
	// budget: at one request every NearQuotaClientEvery or slower they stay
	// well under the headroom.
	s.ClientEvery = max(s.ClientEvery, NearQuotaClientEvery)
	return s
}

// WithoutPassKill is the schedule's uninterrupted twin: the same seed,
// pace and faults but those that stop the manager in the main pass (the
// SIGKILL WithNearQuota adds, or the seed's own kill or leader move
// there). A twin run measures the pass a resumed run is compared with.
func WithoutPassKill(s Schedule) Schedule {
	s.Faults = slices.DeleteFunc(slices.Clone(s.Faults), resumesInPass)
	return s
}

// resumesInPass tells a fault that stops the manager in the main pass: the
// run resumes where it stopped.
func resumesInPass(f Fault) bool {
	return f.Stage == StageMainPass && (f.Kind == KillManager || f.Kind == LeaderMove)
}

// NearQuotaClientEvery is the concurrent client's fastest pace in a run
// with etcd near its quota.
const NearQuotaClientEvery = time.Second

// PacedPass bounds how long a pass that adds passBytes to etcd takes when
// its space budget lets budget bytes out per compaction: a compaction
// every interval frees a write between one and two intervals after it,
// and the engine asks every 2 s and lets etcd settle 2 s once freed
// (migration's compactionPoll and compactionSettle); twice that, for a
// shared machine.
func PacedPass(passBytes, budget int64, interval time.Duration) time.Duration {
	if budget <= 0 || passBytes <= 0 {
		return 0
	}
	compactions := (passBytes + budget - 1) / budget
	return 2 * time.Duration(compactions) * (2*interval + 4*time.Second)
}
