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

package graduation

import (
	"fmt"
	"regexp"
	"strings"
)

// AcceptLoss names where a door lets a person accept the field paths a
// lossy conversion loses, and words, for the paths a round-trip proof found
// lost, how to accept them there: the policy's spec.migration.acceptLoss
// (AcceptLossPolicy), the CLI's flag (AcceptLossFlag), or a library's
// option, by its name ("crdmigrate.Options.AcceptLoss"). The paths
// accepted are the policy's and the options' lists.
type AcceptLoss string

const (
	// AcceptLossPolicy is the policy's spec.migration.acceptLoss.
	AcceptLossPolicy AcceptLoss = ""
	// AcceptLossFlag is the CLI's --accept-loss, once a path.
	AcceptLossFlag AcceptLoss = "--accept-loss"
)

// shellSafe is a word a shell passes as it is.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9/._~:=@+-]+$`)

// Advice is how a person accepts the lost paths at a: the flags, each path
// quoted for a shell when it needs it (a Wildcard would be expanded); the
// option with the paths to list in it; or the policy's field.
func (a AcceptLoss) Advice(lost []string) string {
	switch a {
	case AcceptLossPolicy:
		return "list the paths in spec.migration.acceptLoss"
	case AcceptLossFlag:
		flags := make([]string, len(lost))
		for i, p := range lost {
			if !shellSafe.MatchString(p) {
				p = "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
			}
			flags[i] = string(AcceptLossFlag) + " " + p
		}
		return "accept them with " + strings.Join(flags, " ")
	}
	return fmt.Sprintf("list the paths in %s: %s", a, strings.Join(lost, ", "))
}
