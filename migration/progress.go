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

package migration

// Done is how many objects of the main pass are done: rewritten, skipped
// or failed.
func (p Progress) Done() int64 { return p.Rewritten + p.Skipped + p.Failed }

// Fraction is how far the main pass got: objects done over objects listed
// plus the API server's estimate of those not listed yet, at most 1; 0
// before anything is listed.
func (p Progress) Fraction() float64 {
	total := float64(p.Listed + max(p.Remaining, 0))
	if total == 0 {
		return 0
	}
	return min(float64(p.Done())/total, 1)
}
