package testenv

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPlaywrightVersionMatchesMakefile keeps the one playwright-core version in two places equal.
func TestPlaywrightVersionMatchesMakefile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	want := "PLAYWRIGHT_VERSION := " + PlaywrightVersion
	if !slices.Contains(strings.Split(string(raw), "\n"), want) {
		t.Errorf("the Makefile has no line %q: keep it and PlaywrightVersion in testenv/browser.go equal", want)
	}
}

// strictCSP is as strict as the operator page's: no inline script or style, no other origin.
const strictCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

const clickPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>browser test</title><script src="/app.js" defer></script></head>
<body>
<input id="token" type="password">
<button id="go">Ask</button>
<p id="answer">waiting</p>
</body></html>`

// clickScript sends the input's value as a bearer token, the way the operator page calls its API.
const clickScript = `document.getElementById('go').addEventListener('click', async () => {
  const token = document.getElementById('token').value;
  const res = await fetch('/api', {headers: {Authorization: 'Bearer ' + token}});
  document.getElementById('answer').textContent = await res.text();
});`

// browserTestServer serves page at / and script at /app.js under strictCSP, and at /api answers
// the bearer token it was sent, or 401 without one.
func browserTestServer(t *testing.T, page, script string) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Security-Policy", strictCSP)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(page))
	})
	mux.HandleFunc("GET /app.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		_, _ = w.Write([]byte(script))
	})
	mux.HandleFunc("GET /api", func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte("token " + token))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestBrowserClicksAndReads(t *testing.T) {
	srv := browserTestServer(t, clickPage, clickScript)
	shot := filepath.Join(t.TempDir(), "page.png")
	res := RunBrowser(t,
		BrowserStep{Goto: srv.URL + "/"},
		BrowserStep{Fill: "#token", Value: "s3cret"},
		BrowserStep{Click: "#go"},
		BrowserStep{WaitText: "token s3cret"},
		BrowserStep{Text: "#answer"},
		BrowserStep{Text: "#absent"},
		BrowserStep{Screenshot: shot},
		BrowserStep{Eval: "sessionStorage.length"},
	)
	if want := []string{"token s3cret", "", "0"}; !slices.Equal(res.Texts, want) {
		t.Errorf("texts %q, want %q", res.Texts, want)
	}
	png, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("screenshot %s is not a PNG: starts with %q", shot, png[:min(len(png), 8)])
	}
	if len(res.Console) != 0 {
		t.Errorf("console messages on a page that should have none: %q", res.Console)
	}
	if len(res.Failed) != 0 {
		t.Errorf("failed requests on a page that should have none: %q", res.Failed)
	}
}

// TestBrowserReportsCSPViolations: a page test can assert that its page breaks no
// Content-Security-Policy, because RunBrowser reports the browser's refusals.
func TestBrowserReportsCSPViolations(t *testing.T) {
	page := `<!doctype html><html><head><meta charset="utf-8"></head>
<body><p id="p">static</p><script>document.getElementById('p').textContent = 'inline ran';</script></body></html>`
	srv := browserTestServer(t, page, "")
	res := RunBrowser(t,
		BrowserStep{Goto: srv.URL + "/"},
		BrowserStep{Text: "#p"},
	)
	if want := []string{"static"}; !slices.Equal(res.Texts, want) {
		t.Errorf("texts %q, want %q: the inline script ran despite the policy", res.Texts, want)
	}
	if !slices.ContainsFunc(res.Console, func(m string) bool { return strings.Contains(m, "Content Security Policy") }) {
		t.Errorf("no Content-Security-Policy violation among the console messages %q", res.Console)
	}
}
