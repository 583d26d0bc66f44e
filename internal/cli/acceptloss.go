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
	"regexp"
	"strings"
)

// shellSafe is a word a shell passes as it is.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9/._~:=@+-]+$`)

// acceptLossFlags is the CLI's advice for paths a conversion loses: the
// --accept-loss flags that accept them, each path quoted for a shell when
// it needs it (a Wildcard would be expanded).
func acceptLossFlags(paths []string) string {
	flags := make([]string, len(paths))
	for i, p := range paths {
		if !shellSafe.MatchString(p) {
			p = "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
		}
		flags[i] = "--accept-loss " + p
	}
	return "accept them with " + strings.Join(flags, " ")
}
