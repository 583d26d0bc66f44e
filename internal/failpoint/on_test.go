//go:build failpoints

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

package failpoint

import (
	"reflect"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	got, err := Parse(" proof=1s, sweep=250ms,,")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]time.Duration{"proof": time.Second, "sweep": 250 * time.Millisecond}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"proof", "proof=soon"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) took it", bad)
		}
	}
}
