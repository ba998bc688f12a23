package testenv

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// PlaywrightVersion is the npm playwright-core that drives Chromium for RunBrowser. The
// Makefile's PLAYWRIGHT_VERSION (make browser) must name the same one;
// TestPlaywrightVersionMatchesMakefile checks that.
const PlaywrightVersion = "1.64.1"

// Bounds of a browser session: generous, since a shared test machine can be slow; a test that
// hits one has failed anyway.
const (
	browserStepTimeout    = 30 * time.Second
	browserSessionTimeout = 3 * time.Minute
)

// defaultChromium is where Debian's package chromium (make chromium) puts the browser; the
// environment variable CHROMIUM names another.
const defaultChromium = "/usr/bin/chromium"

//go:embed browser.mjs
var browserDriver []byte

// BrowserStep is one action of a scripted browser session; exactly one action field is set.
type BrowserStep struct {
	Goto       string // navigate to this URL and wait for the load event
	Fill       string // CSS selector of an input, filled with Value
	Value      string
	Click      string // CSS selector of an element to click (the first match)
	WaitText   string // wait until document.body's innerText contains this
	WaitGone   string // wait until document.body's innerText no longer contains this
	Text       string // CSS selector; its innerText is appended to BrowserResult.Texts ("" if absent)
	Screenshot string // path of a full-page PNG to write
	Eval       string // a JavaScript expression evaluated in the page; its JSON result (stringified) is appended to Texts
}

// BrowserResult is what a session read and what the page reported.
type BrowserResult struct {
	Texts   []string // in step order, from Text and Eval steps
	Console []string // console messages of level warning/error and uncaught page errors, e.g. Content-Security-Policy violations, each prefixed with its type
	Failed  []string // requests that failed or answered >= 400, as "METHOD URL STATUS"
}

// browserJob is what the node driver reads on stdin.
type browserJob struct {
	Playwright     string        `json:"playwright"`
	ExecutablePath string        `json:"executablePath"`
	UserDataDir    string        `json:"userDataDir"`
	FailScreenshot string        `json:"failScreenshot"`
	StepTimeoutMs  int64         `json:"stepTimeoutMs"`
	Steps          []BrowserStep `json:"steps"`
}

// browserOutput is what the node driver writes on stdout.
type browserOutput struct {
	Texts   []string `json:"texts"`
	Console []string `json:"console"`
	Failed  []string `json:"failed"`
	Error   *struct {
		Step       int    `json:"step"`
		Message    string `json:"message"`
		URL        string `json:"url"`
		Text       string `json:"text"`
		Screenshot string `json:"screenshot"`
	} `json:"error"`
}

// RunBrowser runs steps in a fresh headless Chromium (a new empty profile: sessionStorage and
// cookies start empty) and returns what it read. A step that fails (timeout 30 s per step) fails
// the test with the step's index, the page's URL and text, and a screenshot saved in the test's
// artefact directory (tb.ArtifactDir, kept with go test -artifacts), whose path it logs.
//
// A real browser, not an HTTP client, because what a page test must catch happens only there:
// scripts that run, Content-Security-Policy that blocks them, storage that a sign-in fills.
func RunBrowser(tb testing.TB, steps ...BrowserStep) BrowserResult {
	tb.Helper()
	for i, s := range steps {
		if n := s.actions(); n != 1 {
			tb.Fatalf("browser step %d has %d actions, want exactly one: %+v", i, n, s)
		}
	}
	node, err := exec.LookPath("node")
	if err != nil {
		tb.Fatalf("node is not installed (the browser tests drive Chromium from node): %v", err)
	}
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = defaultChromium
	}
	if _, err := os.Stat(chromium); err != nil {
		tb.Fatalf("chromium is not installed: run `make browser` (it installs the Debian package chromium): %v", err)
	}
	playwright := playwrightCore(tb)

	dir := tb.TempDir()
	driver := filepath.Join(dir, "browser.mjs")
	if err := os.WriteFile(driver, browserDriver, 0o600); err != nil {
		tb.Fatalf("write the browser driver: %v", err)
	}
	job, err := json.Marshal(browserJob{
		Playwright:     playwright,
		ExecutablePath: chromium,
		UserDataDir:    filepath.Join(dir, "profile"),
		FailScreenshot: filepath.Join(tb.ArtifactDir(), "browser-failure.png"),
		StepTimeoutMs:  browserStepTimeout.Milliseconds(),
		Steps:          steps,
	})
	if err != nil {
		tb.Fatalf("encode the browser steps: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), browserSessionTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, driver)
	cmd.Stdin = bytes.NewReader(job)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Node dies with the test binary even when the test is killed hard, and Chromium with node:
	// playwright talks to it over a pipe that closes then.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	runErr := cmd.Run()

	var out browserOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		tb.Fatalf("browser session: %v (driver: %v)\nstdout:\n%s\nstderr:\n%s", runErr, err, stdout.String(), stderr.String())
	}
	if e := out.Error; e != nil {
		if e.Screenshot != "" {
			tb.Logf("browser screenshot at the failure: %s", e.Screenshot)
		}
		step := "launching Chromium"
		if e.Step >= 0 && e.Step < len(steps) {
			step = fmt.Sprintf("step %d %s", e.Step, steps[e.Step])
		}
		tb.Fatalf("browser %s: %s\npage %s:\n%s\nconsole: %q\nfailed requests: %q\nstderr:\n%s",
			step, e.Message, e.URL, e.Text, out.Console, out.Failed, stderr.String())
	}
	if runErr != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			runErr = fmt.Errorf("not done within %v: %w", browserSessionTimeout, runErr)
		}
		tb.Fatalf("browser session: %v\nstderr:\n%s", runErr, stderr.String())
	}
	return BrowserResult{Texts: out.Texts, Console: out.Console, Failed: out.Failed}
}

// actions counts the action fields set; Value goes with Fill and is not one.
func (s BrowserStep) actions() int {
	n := 0
	for _, f := range []string{s.Goto, s.Fill, s.Click, s.WaitText, s.WaitGone, s.Text, s.Screenshot, s.Eval} {
		if f != "" {
			n++
		}
	}
	return n
}

// String names the step's action for a failure message.
func (s BrowserStep) String() string {
	switch {
	case s.Goto != "":
		return "Goto " + s.Goto
	case s.Fill != "":
		return fmt.Sprintf("Fill %s with %d characters", s.Fill, len(s.Value))
	case s.Click != "":
		return "Click " + s.Click
	case s.WaitText != "":
		return fmt.Sprintf("WaitText %q", s.WaitText)
	case s.WaitGone != "":
		return fmt.Sprintf("WaitGone %q", s.WaitGone)
	case s.Text != "":
		return "Text " + s.Text
	case s.Screenshot != "":
		return "Screenshot " + s.Screenshot
	default:
		return "Eval " + s.Eval
	}
}

var playwrightInstall struct {
	once sync.Once
	dir  string
	err  error
}

// playwrightCore returns the directory of the pinned npm playwright-core, installing it on first
// use into the Makefile's tools cache ($TOOLS_CACHE, default ~/.cache/gitops-reverser/tools)/
// playwright-core-version/, where make browser puts it too, so go test works without make.
func playwrightCore(tb testing.TB) string {
	tb.Helper()
	p := &playwrightInstall
	p.once.Do(func() {
		root, err := toolsCache()
		if err != nil {
			p.err = err
			return
		}
		prefix := filepath.Join(root, "playwright-core-"+PlaywrightVersion)
		p.dir = filepath.Join(prefix, "node_modules", "playwright-core")
		if _, err := os.Stat(filepath.Join(p.dir, "package.json")); err == nil {
			return
		}
		// Into a scratch directory first, as make does: an interrupted install is not taken for
		// a finished one, and another test binary installing at the same time does not collide.
		if err := os.MkdirAll(root, 0o755); err != nil {
			p.err = fmt.Errorf("install playwright-core: %w", err)
			return
		}
		tmp, err := os.MkdirTemp(root, "playwright-core-*.tmp")
		if err != nil {
			p.err = fmt.Errorf("install playwright-core: %w", err)
			return
		}
		defer func() { _ = os.RemoveAll(tmp) }()
		cmd := exec.Command("npm", "install", "--prefix", tmp, "--no-audit", "--no-fund", "playwright-core@"+PlaywrightVersion)
		cmd.Env = append(os.Environ(), "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			p.err = fmt.Errorf("install playwright-core %s with npm: %w\n%s", PlaywrightVersion, err, out)
			return
		}
		if err := os.RemoveAll(prefix); err != nil {
			p.err = fmt.Errorf("install playwright-core: %w", err)
			return
		}
		if err := os.Rename(tmp, prefix); err != nil {
			// Another process may have put its install there first: that one is as good.
			if _, statErr := os.Stat(filepath.Join(p.dir, "package.json")); statErr != nil {
				p.err = fmt.Errorf("install playwright-core: %w", err)
			}
		}
	})
	if p.err != nil {
		tb.Fatal(p.err)
	}
	return p.dir
}

// toolsCache is the Makefile's $(TOOLS_CACHE): $TOOLS_CACHE, default ~/.cache/gitops-reverser/tools.
func toolsCache() (string, error) {
	if root := os.Getenv("TOOLS_CACHE"); root != "" {
		return root, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the tools cache: %w", err)
	}
	return filepath.Join(home, ".cache", "gitops-reverser", "tools"), nil
}
