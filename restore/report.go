package restore

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// printSummary writes the table of a restore: a row a kind with the count of each outcome and a
// total, then each object skipped or failed with why, and what was left out, by reason.
func printSummary(w io.Writer, s Summary, dryRun bool) {
	if s.Commit != "" {
		_, _ = fmt.Fprintf(w, "restored from commit %.12s of %s\n", s.Commit, s.When.Format(time.RFC3339))
	}
	byKind := map[string]map[Outcome]int{}
	total := map[Outcome]int{}
	for _, r := range s.Results {
		kind := cmp.Or(r.Kind, "(file)")
		if byKind[kind] == nil {
			byKind[kind] = map[Outcome]int{}
		}
		byKind[kind][r.Outcome]++
		total[r.Outcome]++
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := []string{"KIND"}
	for _, o := range Outcomes {
		head = append(head, strings.ToUpper(string(wouldBe(o, dryRun))))
	}
	_, _ = fmt.Fprintln(tw, strings.Join(head, "\t"))
	row := func(name string, counts map[Outcome]int) {
		cells := []string{name}
		for _, o := range Outcomes {
			cells = append(cells, fmt.Sprint(counts[o]))
		}
		_, _ = fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		row(k, byKind[k])
	}
	row("TOTAL", total)
	_ = tw.Flush()
	printReasons(w, s.Results, Failed, "failed")
	printReasons(w, s.Results, Skipped, "skipped")
	printLeftOut(w, s.Results)
}

// wouldBe is how an outcome reads in a dry run: nothing was created, it would be.
func wouldBe(o Outcome, dryRun bool) Outcome {
	if dryRun && (o == Created || o == Changed) {
		return "would be " + o
	}
	return o
}

func printReasons(w io.Writer, results []Result, o Outcome, title string) {
	first := true
	for _, r := range results {
		if r.Outcome != o {
			continue
		}
		if first {
			_, _ = fmt.Fprintf(w, "\n%s:\n", title)
			first = false
		}
		_, _ = fmt.Fprintf(w, "  %s: %s\n", describe(r), r.Reason)
	}
}

// printLeftOut counts what was left out by reason, naming a few of each.
func printLeftOut(w io.Writer, results []Result) {
	byReason := map[string][]string{}
	for _, r := range results {
		if r.Outcome == LeftOut {
			byReason[r.Reason] = append(byReason[r.Reason], describe(r))
		}
	}
	reasons := make([]string, 0, len(byReason))
	for reason := range byReason {
		reasons = append(reasons, reason)
	}
	slices.Sort(reasons)
	for i, reason := range reasons {
		if i == 0 {
			_, _ = fmt.Fprintln(w, "\nleft out:")
		}
		names := byReason[reason]
		more := ""
		if len(names) > 3 {
			names, more = names[:3], fmt.Sprintf(" and %d more", len(names)-3)
		}
		_, _ = fmt.Fprintf(w, "  %d %s: %s%s\n", len(byReason[reason]), reason, strings.Join(names, ", "), more)
	}
}

// describe names an object as kubectl does: kind/name, with its namespace, or the file.
func describe(r Result) string {
	switch {
	case r.Kind == "" || r.Name == "":
		return r.Path
	case r.Namespace != "":
		return fmt.Sprintf("%s/%s in %s", strings.ToLower(r.Kind), r.Name, r.Namespace)
	}
	return strings.ToLower(r.Kind) + "/" + r.Name
}

// Bar draws a progress bar on a terminal, redrawn at most ten times a second, and says as each
// object is created or changed (would be, in a dry run) or fails, above the bar.
type Bar struct {
	w      io.Writer
	dryRun bool
	mu     sync.Mutex
	drawn  time.Time
}

// NewBar returns a bar drawn on w, a terminal.
func NewBar(w io.Writer, dryRun bool) *Bar { return &Bar{w: w, dryRun: dryRun} }

// Lines prints a line for each object created, changed or failed, for output that is not a
// terminal.
func Lines(w io.Writer, dryRun bool) func(done, total int, r Result) {
	return func(_, _ int, r Result) {
		if line := lineOf(r, dryRun); line != "" {
			_, _ = fmt.Fprintln(w, line)
		}
	}
}

func lineOf(r Result, dryRun bool) string {
	switch r.Outcome {
	case Created, Changed:
		if r.Reason != "" {
			return fmt.Sprintf("%s %s (%s)", describe(r), wouldBe(r.Outcome, dryRun), r.Reason)
		}
		return fmt.Sprintf("%s %s", describe(r), wouldBe(r.Outcome, dryRun))
	case Failed:
		return fmt.Sprintf("%s failed: %s", describe(r), r.Reason)
	}
	return ""
}

// Progress is the bar's function for Options.Progress.
func (b *Bar) Progress(done, total int, r Result) {
	b.mu.Lock()
	defer b.mu.Unlock()
	line := lineOf(r, b.dryRun)
	if line == "" && done < total && time.Since(b.drawn) < 100*time.Millisecond {
		return
	}
	if line != "" {
		_, _ = fmt.Fprintf(b.w, "\r\033[K%s\n", line)
	}
	const width = 30
	filled := width
	if total > 0 {
		filled = width * done / total
	}
	_, _ = fmt.Fprintf(b.w, "\r\033[Krestoring [%s%s] %d/%d", strings.Repeat("=", filled), strings.Repeat(" ", width-filled), done, total)
	if done >= total {
		_, _ = fmt.Fprintln(b.w)
	}
	b.drawn = time.Now()
}
