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

package paging_test

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graduator/graduator/internal/paging"
)

// keys is a listing of the keys 0..n-1, pageSize at a time; its continue
// token is the next key. expire says, for the i-th LIST (0 first), whether
// it answers 410 Gone and with which carried token ("" for none).
type keys struct {
	n      int
	expire map[int]*string
	calls  int
}

type keyPage struct {
	keys []int
	next string
}

func (k *keys) list(_ context.Context, opts metav1.ListOptions) (keyPage, error) {
	call := k.calls
	k.calls++
	if carried, ok := k.expire[call]; ok {
		status := apierrors.NewResourceExpired("the continue token is too old")
		status.ErrStatus.Continue = *carried
		return keyPage{}, status
	}
	from := 0
	if opts.Continue != "" {
		from, _ = strconv.Atoi(opts.Continue)
	}
	to := min(from+int(opts.Limit), k.n)
	p := keyPage{}
	for i := from; i < to; i++ {
		p.keys = append(p.keys, i)
	}
	if to < k.n {
		p.next = strconv.Itoa(to)
	}
	return p, nil
}

func ptr(s string) *string { return &s }

func TestEachPage(t *testing.T) {
	upTo := func(from, to int) []int {
		var s []int
		for i := from; i < to; i++ {
			s = append(s, i)
		}
		return s
	}
	for _, tc := range []struct {
		name   string
		n      int
		expire map[int]*string
		// refuse makes Restart return an error.
		refuse   bool
		want     []int
		restarts int
		err      string
	}{
		{name: "no expiry: every key once", want: upTo(0, 10)},
		{name: "an expiry with a carried token goes on from it: every key once",
			expire: map[int]*string{2: ptr("4")}, want: upTo(0, 10)},
		{name: "an expiry without one starts again: the first pages twice",
			expire: map[int]*string{2: ptr("")}, want: append(upTo(0, 4), upTo(0, 10)...), restarts: 1},
		{name: "a Restart that refuses stops the listing with the 410",
			expire: map[int]*string{2: ptr("")}, refuse: true, want: upTo(0, 4), err: "continue token is too old"},
		{name: "the first page's 410 is an error: there is no listing to go on",
			expire: map[int]*string{0: ptr("4")}, err: "continue token is too old"},
		{name: "expiries in a row past MaxRestarts stop it",
			expire: map[int]*string{1: ptr("2"), 2: ptr("2"), 3: ptr("2"), 4: ptr("2"), 5: ptr("2"), 6: ptr("2")},
			want:   upTo(0, 2), err: "expired 6 times in a row"},
		{name: "MaxRestarts expiries in a row, then a page: it goes on",
			expire: map[int]*string{1: ptr("2"), 2: ptr("2"), 3: ptr("2"), 4: ptr("2"), 5: ptr("2")},
			want:   upTo(0, 10)},
		{name: "restarts that get no further count up to the limit",
			expire: map[int]*string{2: ptr(""), 5: ptr(""), 8: ptr(""), 11: ptr(""), 14: ptr(""), 17: ptr("")},
			want:   slices.Concat(upTo(0, 4), upTo(0, 4), upTo(0, 4), upTo(0, 4), upTo(0, 4), upTo(0, 4)), restarts: 5,
			err: "expired 6 times in a row"},
		{name: "restarts that get further each time do not count",
			n:        20,
			expire:   map[int]*string{1: ptr(""), 4: ptr(""), 8: ptr(""), 13: ptr(""), 19: ptr(""), 26: ptr("")},
			want:     slices.Concat(upTo(0, 2), upTo(0, 4), upTo(0, 6), upTo(0, 8), upTo(0, 10), upTo(0, 12), upTo(0, 20)),
			restarts: 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := &keys{n: cmp.Or(tc.n, 10), expire: tc.expire}
			restarts := 0
			pager := paging.Pager[keyPage]{List: k.list, Continue: func(p keyPage) string { return p.next }, PageSize: 2,
				Restart: func(expired error) error {
					if tc.refuse {
						return expired
					}
					restarts++
					return nil
				}}
			var got []int
			err := pager.EachPage(context.Background(), "", func(p keyPage) error {
				got = append(got, p.keys...)
				return nil
			})
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("EachPage: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("EachPage returned %v, want an error with %q", err, tc.err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("keys seen %v, want %v", got, tc.want)
			}
			if restarts != tc.restarts {
				t.Errorf("Restart called %d times, want %d", restarts, tc.restarts)
			}
		})
	}
}

func TestEachPageReturnsFnError(t *testing.T) {
	k := &keys{n: 10}
	stop := errors.New("stop")
	pager := paging.Pager[keyPage]{List: k.list, Continue: func(p keyPage) string { return p.next }, PageSize: 2}
	if err := pager.EachPage(context.Background(), "", func(keyPage) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("EachPage returned %v, want fn's error", err)
	}
	if k.calls != 1 {
		t.Errorf("%d LISTs after fn stopped the listing at the first page, want 1", k.calls)
	}
}

// TestEachPageAhead: every page in order, the listing's error and fn's
// returned as they are.
func TestEachPageAhead(t *testing.T) {
	k := &keys{n: 10}
	pager := paging.Pager[keyPage]{List: k.list, Continue: func(p keyPage) string { return p.next }, PageSize: 2}
	var got []int
	if err := pager.EachPageAhead(context.Background(), func(p keyPage) error {
		got = append(got, p.keys...)
		return nil
	}); err != nil || !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Errorf("EachPageAhead = %v, keys seen %v; want every key in order", err, got)
	}

	k = &keys{n: 10, expire: map[int]*string{0: ptr("")}}
	pager.List = k.list
	if err := pager.EachPageAhead(context.Background(), func(keyPage) error { return nil }); !apierrors.IsResourceExpired(err) {
		t.Errorf("EachPageAhead = %v, want the LIST's 410", err)
	}

	k = &keys{n: 10}
	pager.List = k.list
	stop := errors.New("stop")
	if err := pager.EachPageAhead(context.Background(), func(keyPage) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("EachPageAhead = %v, want fn's error", err)
	}
}
