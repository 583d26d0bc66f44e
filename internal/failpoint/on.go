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
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// EnvVar names the pauses and their durations.
const EnvVar = "GRADUATOR_FAILPOINTS"

var pauses = sync.OnceValue(func() map[string]time.Duration {
	p, err := Parse(os.Getenv(EnvVar))
	if err != nil {
		panic(fmt.Sprintf("%s: %v", EnvVar, err))
	}
	return p
})

func pause(ctx context.Context, name string) {
	d := pauses()[name]
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Parse reads "name=duration,name=duration".
func Parse(s string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		name, value, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not name=duration", item)
		}
		d, err := time.ParseDuration(value)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", item, err)
		}
		out[strings.TrimSpace(name)] = d
	}
	return out, nil
}
