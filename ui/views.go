package ui

import (
	"bytes"
	"fmt"
	"html/template"
	"sync"
	"time"
)

// views are the pages the server renders, each the layout around one content template.
var views = []string{"overview", "proposal", "signin", "error"}

// parseViews parses the layout once per view, with that view's content.
func parseViews() (map[string]*template.Template, error) {
	base, err := template.New("").Funcs(template.FuncMap{
		"ago":   ago,
		"stamp": stamp,
		"short": shortSHA,
	}).ParseFS(templateFiles, "templates/layout.html", "templates/parts.html")
	if err != nil {
		return nil, fmt.Errorf("operator page: parse layout: %w", err)
	}
	out := map[string]*template.Template{}
	for _, v := range views {
		t, err := base.Clone()
		if err == nil {
			t, err = t.ParseFS(templateFiles, "templates/"+v+".html")
		}
		if err != nil {
			return nil, fmt.Errorf("operator page: parse view %s: %w", v, err)
		}
		out[v] = t
	}
	return out, nil
}

// ago says how long ago t was, roughly, as people say it.
func ago(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := time.Since(t)
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// stamp is the exact time, for a tooltip.
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func shortSHA(sha string) string {
	if len(sha) > 10 {
		return sha[:10]
	}
	return sha
}

// duration is a run's length, rounded for reading. Times of objects are kept in whole seconds,
// so a quick run lasts 0.
func duration(d time.Duration) string {
	switch {
	case d <= 0:
		return "<1s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func getBuffer() *bytes.Buffer { return buffers.Get().(*bytes.Buffer) }

// putBuffer returns a buffer for reuse, unless one huge page made it too big to keep.
func putBuffer(b *bytes.Buffer) {
	if b.Cap() > 4<<20 {
		return
	}
	b.Reset()
	buffers.Put(b)
}
