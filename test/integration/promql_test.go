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

package integration

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// A query of the dashboard or the alerts, with where it came from.
type query struct {
	from, expr string
}

// dashboardQueries returns every PromQL expression of a Grafana dashboard:
// panel targets (rows' nested panels too) and templating queries.
func dashboardQueries(raw []byte) ([]query, error) {
	var dash struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		return nil, fmt.Errorf("parse the dashboard: %w", err)
	}
	var out []query
	var walk func(panels []json.RawMessage) error
	walk = func(panels []json.RawMessage) error {
		for _, raw := range panels {
			var p struct {
				Title   string            `json:"title"`
				Panels  []json.RawMessage `json:"panels"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			}
			if err := json.Unmarshal(raw, &p); err != nil {
				return err
			}
			for _, t := range p.Targets {
				out = append(out, query{from: "panel " + p.Title, expr: t.Expr})
			}
			if err := walk(p.Panels); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(dash.Panels); err != nil {
		return nil, fmt.Errorf("parse the dashboard's panels: %w", err)
	}
	for _, v := range dash.Templating.List {
		if v.Definition != "" {
			out = append(out, query{from: "variable " + v.Name, expr: v.Definition})
		}
	}
	return out, nil
}

var (
	metricName   = regexp.MustCompile(`\bgraduator_[a-z0-9_]+`)
	selector     = regexp.MustCompile(`\b(graduator_[a-z0-9_]+)\s*\{([^}]*)\}`)
	matcherLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	grouping     = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	labelValues  = regexp.MustCompile(`label_values\(\s*(graduator_[a-z0-9_]+)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)`)
)

// metricUse is what a query needs of one metric family: the family's name
// and the label names it selects, groups or reads by.
type metricUse struct {
	family string
	labels []string
}

// uses returns the metric families an expression reads and the labels it
// needs of each. Histogram series (_bucket, _sum, _count) name their family;
// `le` is needed only of buckets. Labels of a by/without clause are needed of
// every family in the expression, as an aggregation over them needs them.
func uses(expr string) []metricUse {
	needs := map[string][]string{}
	add := func(family string, labels ...string) {
		for _, l := range labels {
			if l == "le" && !strings.HasSuffix(family, "_bucket") {
				continue
			}
			if !slices.Contains(needs[family], l) {
				needs[family] = append(needs[family], l)
			}
		}
		if _, ok := needs[family]; !ok {
			needs[family] = nil
		}
	}
	var grouped []string
	for _, m := range grouping.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(m[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				grouped = append(grouped, l)
			}
		}
	}
	for _, name := range metricName.FindAllString(expr, -1) {
		add(name, grouped...)
	}
	for _, m := range selector.FindAllStringSubmatch(expr, -1) {
		for _, l := range matcherLabel.FindAllStringSubmatch(m[2], -1) {
			add(m[1], l[1])
		}
	}
	for _, m := range labelValues.FindAllStringSubmatch(expr, -1) {
		add(m[1], m[2])
	}
	var out []metricUse
	for name, labels := range needs {
		family := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok {
				family = base
			}
		}
		out = append(out, metricUse{family: family, labels: labels})
	}
	slices.SortFunc(out, func(a, b metricUse) int { return strings.Compare(a.family, b.family) })
	return out
}

// missing checks each use against the families a scrape returned and says,
// one line a problem, what is not served: an unknown family, or a label no
// series of the family carries.
func missing(queries []query, families map[string]*dto.MetricFamily) []string {
	var problems []string
	for _, q := range queries {
		for _, use := range uses(q.expr) {
			family, ok := families[use.family]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: %s is not served (query %q)", q.from, use.family, q.expr))
				continue
			}
			for _, label := range use.labels {
				if !carries(family, label) {
					problems = append(problems, fmt.Sprintf("%s: no series of %s has the label %q (query %q)",
						q.from, use.family, label, q.expr))
				}
			}
		}
	}
	return problems
}

func carries(family *dto.MetricFamily, label string) bool {
	for _, m := range family.GetMetric() {
		if label == "le" && m.GetHistogram() != nil {
			return true
		}
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				return true
			}
		}
	}
	return false
}
