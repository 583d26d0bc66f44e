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

package check

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Report is the JSON output of `graduator check`: a contract.
type Report struct {
	// Safe is false when a finding is at error level.
	Safe     bool      `json:"safe"`
	Errors   int       `json:"errors"`
	Warnings int       `json:"warnings"`
	Findings []Finding `json:"findings"`
}

// NewReport counts the findings.
func NewReport(findings []Finding) Report {
	r := Report{Findings: findings}
	if r.Findings == nil {
		r.Findings = []Finding{}
	}
	for _, f := range findings {
		switch f.Enforcement {
		case Error:
			r.Errors++
		case Warning:
			r.Warnings++
		}
	}
	r.Safe = r.Errors == 0
	return r
}

// Summary is the one-line verdict.
func (r Report) Summary() string {
	verdict := "safe"
	if !r.Safe {
		verdict = "UNSAFE"
	}
	return fmt.Sprintf("%s: %d errors, %d warnings", verdict, r.Errors, r.Warnings)
}

// WriteJSON writes the report as indented JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the findings grouped by CRD, then the summary; color
// adds ANSI colours for a terminal.
func (r Report) WriteText(w io.Writer, color bool) error {
	paint := func(e Enforcement, s string) string {
		if !color {
			return s
		}
		code := "33" // yellow
		if e == Error {
			code = "31" // red
		}
		return "\x1b[" + code + "m" + s + "\x1b[0m"
	}
	var b strings.Builder
	crd := ""
	for _, f := range r.Findings {
		if f.CRD != crd {
			crd = f.CRD
			fmt.Fprintf(&b, "%s\n", crd)
		}
		where := f.Version
		if where == "" {
			where = "(all versions)"
		}
		fmt.Fprintf(&b, "  %s %s [%s] %s\n", paint(f.Enforcement, fmt.Sprintf("%-7s", f.Enforcement)), where, f.Rule, f.Message)
	}
	b.WriteString(r.Summary() + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteMarkdown writes the report for a pull-request comment.
func (r Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	icon := "✅"
	if !r.Safe {
		icon = "❌"
	}
	fmt.Fprintf(&b, "### %s CRD upgrade check: %s\n\n", icon, r.Summary())
	if len(r.Findings) > 0 {
		b.WriteString("| | CRD | version | rule | finding |\n| --- | --- | --- | --- | --- |\n")
		for _, f := range r.Findings {
			mark := "⚠️"
			if f.Enforcement == Error {
				mark = "❌"
			}
			fmt.Fprintf(&b, "| %s | `%s` | %s | `%s` | %s |\n", mark, f.CRD, f.Version, f.Rule, strings.ReplaceAll(f.Message, "|", "\\|"))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
