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

// Package apiservers asks every API server of a control plane which storage
// version it writes a resource in. Each API server learns a CRD's storage
// switch from its own watch of the CRD; one that learns it late writes the
// old version, and a balancer in front of them sends some of a migration's
// writes to it.
//
// Where the servers can be dialled (self-managed control planes: kubeadm,
// Cluster API, k3s), each is asked at its address in the `kubernetes`
// EndpointSlice for its discovery, with the resource's storageVersionHash.
// Where they cannot (a managed control plane reached from a laptop or a CI
// runner through one public endpoint), their number is still known (the
// EndpointSlice's addresses, the kube-apiserver identity Leases), and the
// front door is asked on fresh connections until a server that had not
// learned the switch would have answered at least once, but with a stated
// probability. One server needs no dial: the front door is the server.
//
// Judge and JudgeFrontDoor decide from plain values; Checker does the reads.
package apiservers

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// State is what asking the API servers one by one found.
type State string

const (
	// Agree: every API server listed serves the wanted storage version hash.
	Agree State = "Agree"
	// Behind: an API server serves another hash (or not the resource yet):
	// it still writes another version. Wait for it. Also a check that
	// could not be taken now (a read timed out): wait, and ask again.
	Behind State = "Behind"
	// Unchecked: the API servers cannot be asked one by one (the addresses
	// cannot be read, or one cannot be reached, as in a managed control
	// plane behind one address). The caller falls back to a settle delay.
	Unchecked State = "Unchecked"
)

// Verdict is the outcome of one check, with the words a person reads in a
// condition or a summary.
type Verdict struct {
	State State
	// Servers are the addresses (host:port) listed, sorted.
	Servers []string
	// Reason says what was found: which server is behind and what it
	// serves, or why the servers could not be asked one by one.
	Reason string
	// Remedy, when Unchecked, names the right that would let the check
	// count the servers, when the lack of it is why they could not be
	// checked.
	Remedy string
}

// Answer is what one API server said of the resource.
type Answer struct {
	// Server is its address (host:port).
	Server string
	// Hash is the resource's storageVersionHash in its discovery; empty
	// when it does not serve the resource at that version.
	Hash string
	// Err is set when it could not be asked.
	Err error
	// Peer is the fingerprint of the certificate the answer came with,
	// when asked through the front door.
	Peer string
}

// Judge decides from the answers of every listed server. listed are the
// addresses read, or listErr why they could not be; want is the hash of the
// storage version (apidiscovery.StorageVersionHash). A server behind wins
// over one unreachable: it is known to write the old version, so the caller
// waits rather than fall back to a blind delay.
func Judge(want string, listed []string, listErr error, answers []Answer) Verdict {
	servers := slices.Sorted(slices.Values(listed))
	switch {
	case errors.As(listErr, new(notNow)):
		return Verdict{State: Behind, Reason: fmt.Sprintf("whether every API server serves the storage version cannot be told yet, "+
			"as the API servers could not be listed now (looking again): %s", short(listErr))}
	case listErr != nil:
		return Verdict{State: Unchecked, Reason: fmt.Sprintf("the API servers cannot be listed: %v", listErr)}
	case len(servers) == 0:
		return Verdict{State: Unchecked, Reason: "the kubernetes EndpointSlice in default lists no API server"}
	}
	byServer := map[string]Answer{}
	for _, a := range answers {
		byServer[a.Server] = a
	}
	var unreachable []string
	for _, s := range servers {
		a, ok := byServer[s]
		switch {
		case !ok:
			unreachable = append(unreachable, fmt.Sprintf("%s was not asked", s))
		case a.Err != nil:
			unreachable = append(unreachable, fmt.Sprintf("%s: %s", s, short(a.Err)))
		case a.Hash == "":
			return Verdict{State: Behind, Servers: servers,
				Reason: fmt.Sprintf("API server %s does not serve the storage version yet", s)}
		case a.Hash != want:
			return Verdict{State: Behind, Servers: servers,
				Reason: fmt.Sprintf("API server %s still serves storage version hash %s, not %s", s, a.Hash, want)}
		}
	}
	if len(unreachable) > 0 {
		return Verdict{State: Unchecked, Servers: servers, Reason: fmt.Sprintf("%d of %d API servers cannot be asked one by one from here (%s)",
			len(unreachable), len(servers), strings.Join(unreachable, "; "))}
	}
	return Verdict{State: Agree, Servers: servers, Reason: fmt.Sprintf("every one of %d API servers (%s) serves storage version hash %s",
		len(servers), strings.Join(servers, ", "), want)}
}

// JudgeFrontDoor decides where the servers could not all be asked one by
// one (direct is Unchecked, or was not tried: one server) from the answers
// taken through the front door and the count of servers behind it. A count
// unknown leaves the verdict Unchecked: no number of answers can be derived.
func JudgeFrontDoor(want string, direct Verdict, count Count, answers []Answer) Verdict {
	if direct.State == Agree || direct.State == Behind {
		return direct
	}
	n, howCounted := count.Servers()
	if n == 0 {
		why := fmt.Sprintf("the number of API servers is unknown (the EndpointSlice: %s; the identity Leases: %s)",
			orNone(count.ListErr, count.Listed), orNone(count.LeasesErr, count.Leases))
		return Verdict{State: Unchecked, Servers: direct.Servers, Reason: joinReasons(why, direct.Reason), Remedy: count.remedy()}
	}
	state, why := frontDoor(want, n, howCounted, answers)
	return Verdict{State: state, Servers: direct.Servers, Reason: joinReasons(why, direct.Reason)}
}

// orNone says what one source of the count found: its error, or how many.
func orNone(err error, n int) string {
	if err != nil {
		return short(err)
	}
	return fmt.Sprintf("%d listed", n)
}

// joinReasons puts the verdict first and what led to it after, so that a
// reason cut to a status field's length loses the details, not the verdict.
func joinReasons(verdict, details string) string {
	if details == "" {
		return verdict
	}
	return verdict + "; " + details
}

// Joined returns the servers of now that were not among before: a server
// that joined since (a rolling control-plane upgrade) was not checked while
// it may have taken writes.
func Joined(before, now []string) []string {
	var joined []string
	for _, s := range now {
		if !slices.Contains(before, s) {
			joined = append(joined, s)
		}
	}
	return joined
}
