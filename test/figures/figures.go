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

// Package figures keeps each measured table of the documents in one place:
// between two markers, written by the command that measures it, under a
// stamp that says where it was measured. Outside the markers a document
// states targets in words and links to the table (the check in
// test/scripts holds it to that).
//
// A block reads
//
//	<!-- BEGIN NAME (written by `COMMAND`) -->
//
//	Measured at commit C, DATE, by `COMMAND LINE`, on MACHINE.
//
//	TABLE
//
//	<!-- END NAME -->
package figures

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Begin is the line that opens block name, which command writes.
func Begin(name, command string) string {
	return fmt.Sprintf("<!-- BEGIN %s (written by `%s`) -->", name, command)
}

// End is the line that closes block name.
func End(name string) string { return "<!-- END " + name + " -->" }

// Stamp says where a table was measured.
type Stamp struct {
	// Commit is the checkout's commit, "+ local changes" when its tree
	// differs from it.
	Commit string
	// Date is the day and time the measurement started, UTC.
	Date time.Time
	// Command is the command line that measured it.
	Command string
	// Machine is the CPUs and the load the run saw at its start.
	Machine string
}

// NewStamp stamps a measurement that starts now, by command, in the
// checkout of the working directory.
func NewStamp(command string) Stamp {
	return Stamp{Commit: commit(), Date: time.Now().UTC(), Command: command, Machine: machine()}
}

// String is the stamp's line in the document.
func (s Stamp) String() string {
	return fmt.Sprintf("Measured at commit %s, %s, by `%s`, on %s.", s.Commit, s.Date.Format(stampTime), s.Command,
		s.Machine)
}

// stampTime is the layout of a stamp's time: to the minute, in UTC.
const stampTime = "2006-01-02 15:04 MST"

func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if dirty, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(dirty) > 0 {
		c += " + local changes"
	}
	return c
}

func machine() string {
	m := fmt.Sprintf("%d CPUs (GOMAXPROCS %d)", runtime.NumCPU(), runtime.GOMAXPROCS(0))
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(load)); len(f) > 0 {
			m += ", load " + f[0] + " at the start"
		}
	}
	return m
}

// beginLine matches a block's opening line; its groups are the block's
// name and the command that writes it.
var beginLine = regexp.MustCompile("(?m)^<!-- BEGIN ([A-Z0-9 ]+?) \\(written by `([^`]+)`\\) -->$")

// stampLine matches what String writes: the commit (short, with " + local
// changes" when the tree differed), the time, the command and the machine.
var stampLine = regexp.MustCompile("^Measured at commit ([0-9a-f]{7,40}(?: \\+ local changes)?|unknown), " +
	"(\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2} UTC), by `([^`]+)`, on ([^\\n]+)\\.$")

// ParseStamp reads a stamp's line as String writes it; a line String
// cannot have written is an error.
func ParseStamp(line string) (Stamp, error) {
	m := stampLine.FindStringSubmatch(line)
	if m == nil {
		return Stamp{}, fmt.Errorf("not a stamp (%q): want %q", line,
			"Measured at commit C, YYYY-MM-DD HH:MM UTC, by `COMMAND`, on MACHINE.")
	}
	date, err := time.Parse(stampTime, m[2])
	if err != nil {
		return Stamp{}, fmt.Errorf("stamp %q: its time: %w", line, err)
	}
	return Stamp{Commit: m[1], Date: date.UTC(), Command: m[3], Machine: m[4]}, nil
}

// Replace returns doc with block name's contents replaced by the stamp
// and table. The opening line stays as doc has it.
func Replace(doc, name string, stamp Stamp, table string) (string, error) {
	blocks, err := Blocks(doc)
	if err != nil {
		return "", err
	}
	i := slices.IndexFunc(blocks, func(b Block) bool { return b.Name == name })
	if i < 0 {
		return "", fmt.Errorf("no block %s (a line %q)", name, Begin(name, "COMMAND"))
	}
	body := "\n\n" + stamp.String() + "\n\n" + strings.TrimSpace(table) + "\n\n"
	return doc[:blocks[i].BodyStart] + body + doc[blocks[i].BodyEnd:], nil
}

// Write replaces block name of the document at path (see Replace).
func Write(path, name string, stamp Stamp, table string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("write %s into %s: %w", name, path, err)
	}
	updated, err := Replace(string(doc), name, stamp, table)
	if err != nil {
		return fmt.Errorf("write %s into %s: %w", name, path, err)
	}
	if err := os.WriteFile(path, []byte(updated), 0o644); err != nil {
		return fmt.Errorf("write %s into %s: %w", name, path, err)
	}
	return nil
}

// Block is one generated block of a document.
type Block struct {
	Name string
	// Command is the command its opening line says writes it.
	Command string
	// Start and End are the byte offsets of its opening line's start and
	// its closing line's end; BodyStart and BodyEnd those of what lies
	// between the two lines.
	Start, End, BodyStart, BodyEnd int
}

// Body is what the block holds between its two lines in doc.
func (b Block) Body(doc string) string { return doc[b.BodyStart:b.BodyEnd] }

// Blocks are the generated blocks of doc, in order; an opening line
// without its closing line is an error.
func Blocks(doc string) ([]Block, error) {
	var blocks []Block
	for _, m := range beginLine.FindAllStringSubmatchIndex(doc, -1) {
		name := doc[m[2]:m[3]]
		closing := strings.Index(doc[m[1]:], End(name))
		if closing < 0 {
			return nil, fmt.Errorf("block %s has no %q", name, End(name))
		}
		blocks = append(blocks, Block{Name: name, Command: doc[m[4]:m[5]], Start: m[0],
			End: m[1] + closing + len(End(name)), BodyStart: m[1], BodyEnd: m[1] + closing})
	}
	return blocks, nil
}
