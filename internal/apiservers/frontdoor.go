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

package apiservers

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// MissedAtMost is the chance the front-door check may leave of never
// meeting a server that has not learned the switch: the answers taken are
// enough that, with the balancer spreading fresh connections evenly, a late
// one of n is missed with a probability below it.
const MissedAtMost = 1e-4

// AnswersFor is how many answers through the front door meet each of n
// servers, spread evenly, with a probability of at least 1 - missed: a given
// server is missed by k answers with probability ((n-1)/n)^k. One server is
// met by the first answer; with n unknown (0) nothing can be derived.
func AnswersFor(n int, missed float64) int {
	switch {
	case n <= 0:
		return 0
	case n == 1:
		return 1
	}
	return int(math.Ceil(math.Log(missed) / math.Log(float64(n-1)/float64(n))))
}

// Missed is the probability that k answers spread evenly over n servers
// never meet a given one.
func Missed(n, k int) float64 {
	if n <= 1 {
		return 0
	}
	return math.Pow(float64(n-1)/float64(n), float64(k))
}

// Count is how many API servers the cluster has, known without dialling
// them: the addresses of the kubernetes EndpointSlice and the live
// kube-apiserver identity Leases in kube-system. Either may be unreadable.
type Count struct {
	// Listed is the number of addresses the EndpointSlice lists; ListErr why
	// it could not be read.
	Listed  int
	ListErr error
	// Leases is the number of live identity Leases; LeasesErr why they
	// could not be read.
	Leases    int
	LeasesErr error
}

// assumedWithoutLeases is the fewest servers the front-door check assumes
// when the identity Leases cannot be read: the EndpointSlice of a managed
// control plane may list one address for several servers, and three is
// their usual number. A higher count only takes more answers.
const assumedWithoutLeases = 3

// Servers is the count the front-door check plans with, and how it was
// found; 0 when neither source could be read.
func (c Count) Servers() (int, string) {
	switch {
	case c.ListErr != nil && c.LeasesErr != nil:
		return 0, ""
	case c.LeasesErr != nil:
		n := max(c.Listed, assumedWithoutLeases)
		return n, fmt.Sprintf("%d listed in the EndpointSlice, at least %d assumed as the identity Leases cannot be read",
			c.Listed, n)
	case c.ListErr != nil || c.Leases >= c.Listed:
		return c.Leases, fmt.Sprintf("%d by their identity Leases", c.Leases)
	}
	return c.Listed, fmt.Sprintf("%d listed in the EndpointSlice", c.Listed)
}

// remedy names the right whose lack left the servers uncounted.
func (c Count) remedy() string {
	if errors.Is(c.LeasesErr, errLeasesForbidden) {
		return "list on leases in kube-system"
	}
	return ""
}

// one reports a cluster both sources agree has one API server: asking
// through the front door is asking it, whatever address it advertises
// (envtest's, kind's and minikube's cannot be dialled from the host).
func (c Count) one() bool {
	return c.ListErr == nil && c.LeasesErr == nil && c.Listed <= 1 && c.Leases == 1
}

// frontDoor is what the answers through the front door say of the n
// servers behind it, with the words a person reads.
func frontDoor(want string, n int, howCounted string, answers []Answer) (State, string) {
	peers := map[string]bool{}
	for i, a := range answers {
		switch {
		case a.Err != nil:
			// The front door is how the run reaches the cluster: an
			// answer missing now is asked again, not left to the clock.
			return Behind, fmt.Sprintf("the front door did not answer (looking again): %s", short(a.Err))
		case a.Hash == "":
			return Behind, fmt.Sprintf("an API server behind the front door does not serve the storage version yet (answer %d of %d)",
				i+1, len(answers))
		case a.Hash != want:
			return Behind, fmt.Sprintf("an API server behind the front door still serves storage version hash %s, not %s (answer %d of %d)",
				a.Hash, want, i+1, len(answers))
		}
		if a.Peer != "" {
			peers[a.Peer] = true
		}
	}
	if n == 1 {
		return Agree, fmt.Sprintf("the one API server (%s) serves storage version hash %s, asked through the front door", howCounted, want)
	}
	reason := fmt.Sprintf("%d answers through the front door on fresh connections, all at the new hash: "+
		"a late one of %d API servers (%s) missed with probability %.1e", len(answers), n, howCounted, Missed(n, len(answers)))
	if len(peers) == 1 {
		reason += "; every answer came with the same serving certificate, so a balancer that pins this client " +
			"(session affinity) cannot be told from servers that share one"
	}
	return Agree, reason
}

// maxErrorText bounds each server's error in a reason: the verdict comes
// first and a person reads every server's cause, not the first one's
// whole TLS chain.
const maxErrorText = 90

// short is an error's text cut to maxErrorText characters.
func short(err error) string {
	s := err.Error()
	if len(s) <= maxErrorText {
		return s
	}
	// Keep the end: a dial error's cause ("connection refused", "i/o
	// timeout") is its last words.
	return "..." + strings.TrimSpace(s[len(s)-maxErrorText+3:])
}
