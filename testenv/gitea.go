package testenv

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"code.gitea.io/sdk/gitea"
)

// GiteaVersion is the Gitea server the pull-request tests run against, built from the Go module
// proxy. The Makefile's GITEA_VERSION (make gitea) must name the same one;
// TestGiteaVersionMatchesMakefile checks that.
const GiteaVersion = "v1.26.0"

// GiteaAdmin is the site administrator StartGitea creates. The repositories CreateRepo makes for
// it are GiteaAdmin/name.
const GiteaAdmin = "gitops-admin"

const (
	giteaModule    = "code.gitea.io/gitea"
	giteaPassword  = "gitops-test-password" // every user's; only loopback ever sees it
	giteaStopGrace = 10 * time.Second
	giteaMergeWait = time.Minute
)

// giteaAssets are the module's folders a Gitea built without the bindata tag reads at run time from
// its STATIC_ROOT_PATH: options (locales, and the readme, gitignore and license templates auto_init
// uses), templates and public.
var giteaAssets = []string{"options", "templates", "public"}

// GiteaBinary returns the pinned gitea binary (see EnsureGitea), failing tb if it cannot be built.
func GiteaBinary(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(toolOnce(tb, giteaModule+"@"+GiteaVersion, EnsureGitea), "gitea")
}

// EnsureGitea returns $TOOLS_CACHE/gitea-GiteaVersion, which holds the gitea binary and the asset
// folders it serves, building it there on first use (minutes). go install cannot build Gitea (its
// go.mod has replace directives), so this builds a writable copy of the module's source, with cgo
// for sqlite (see buildCached for the cache, its lock and scratch folder).
func EnsureGitea() (string, error) {
	return buildCached("gitea-"+GiteaVersion, append(slices.Clone(giteaAssets), "gitea"), buildGitea)
}

// buildGitea builds tmp/gitea from a copy of the module's source in tmp/src, and moves the asset
// folders to tmp.
func buildGitea(tmp string) error {
	mod, err := giteaModuleDir(tmp)
	if err != nil {
		return err
	}
	// The module cache is read-only, and -mod=mod may have to write go.mod and go.sum.
	src := filepath.Join(tmp, "src")
	if err := os.CopyFS(src, os.DirFS(mod)); err != nil {
		return fmt.Errorf("copy gitea source: %w", err)
	}
	// Gitea's Makefile stamps the version (without its v), which the API reports and the SDK checks.
	ldflags := "-s -w -X main.Version=" + strings.TrimPrefix(GiteaVersion, "v")
	args := slices.Concat([]string{"build", "-trimpath", "-tags", "sqlite sqlite_unlock_notify", "-ldflags", ldflags},
		Unoptimised, []string{"-o", filepath.Join(tmp, "gitea"), "."})
	cmd := exec.Command("go", args...)
	cmd.Dir = src
	// make test exports CGO_ENABLED=0, and Gitea's sqlite driver needs cgo. Its C file, all of
	// sqlite in one, is compiled without optimisation or debugging information: 6 s instead of
	// 56 s on one core here (19 s with -O1), for a database that serves a few test requests.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "CGO_CFLAGS=-O0 -g0", "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build gitea %s: %w\n%s", GiteaVersion, err, out)
	}
	for _, name := range giteaAssets {
		if err := os.Rename(filepath.Join(src, name), filepath.Join(tmp, name)); err != nil {
			return fmt.Errorf("keep gitea's %s: %w", name, err)
		}
	}
	return nil
}

// giteaModuleDir downloads the Gitea module (a no-op when the module cache has it) and returns its
// directory there.
func giteaModuleDir(tmp string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", giteaModule+"@"+GiteaVersion)
	cmd.Dir = tmp // outside any module
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	out, err := cmd.Output()
	if err != nil { // the JSON on stdout says why
		return "", fmt.Errorf("download %s@%s: %w\n%s", giteaModule, GiteaVersion, err, out)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", fmt.Errorf("download %s@%s: no module directory in %q (%v)", giteaModule, GiteaVersion, out, err)
	}
	return mod.Dir, nil
}

// Gitea is a Gitea server of the test's own on loopback, with an administrator (GiteaAdmin) and
// an all-scopes API token for it.
type Gitea struct {
	addr  string // 127.0.0.1:port
	dir   string // work path: app.ini, sqlite database, repositories, log
	bin   string
	token string
}

// StartGitea starts a fresh Gitea in tb.TempDir() on a free loopback port, with a sqlite database
// and what tests do not use (SSH, mail, LFS, indexers, cron jobs, actions, packages) off, waits
// until its API answers, creates the administrator GiteaAdmin and an API token for it, and stops
// the server when the test ends. The first call builds Gitea (see EnsureGitea).
func StartGitea(tb testing.TB) *Gitea {
	tb.Helper()
	bin := GiteaBinary(tb)
	g := &Gitea{addr: FreeAddr(tb), dir: tb.TempDir(), bin: bin}
	if err := g.writeConfig(filepath.Dir(bin)); err != nil {
		tb.Fatal(err)
	}
	p := &process{name: "gitea", path: bin, args: g.args("web"), logPath: filepath.Join(g.dir, "gitea.log")}
	if err := p.start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.stop(giteaStopGrace) })
	if err := waitHealthy(context.Background(), p, http.DefaultClient, g.URL()+"/api/v1/version"); err != nil {
		tb.Fatal(err)
	}
	if out, err := g.cli("admin", "user", "create", "--admin", "--username", GiteaAdmin,
		"--password", giteaPassword, "--email", GiteaAdmin+"@example.com", "--must-change-password=false"); err != nil {
		tb.Fatalf("create the gitea administrator: %v\n%s\nserver log:\n%s", err, out, p.logTail())
	}
	g.token = g.newToken(tb, GiteaAdmin)
	return g
}

// giteaConfig is the app.ini StartGitea writes; writeConfig fills in the %[n]s. Gitea refuses to
// run as root unless I_AM_BEING_UNSAFE_RUNNING_AS_ROOT (test machines often are root). With SSH
// off it still rewrites an authorized_keys file at start, by default the user's ~/.ssh one: two
// servers starting at once raced on it (one failed to rename its temporary file away), and a
// test has no business there, so it writes none, and its SSH folder is its own. Every secret
// is set, JWT_SECRET too (oauth2 off or not): Gitea writes a missing one back into app.ini, and its
// CLI, which reads the same file, runs beside the server.
const giteaConfig = `APP_NAME = gitops-reverser tests
WORK_PATH = %[1]s
I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true

[server]
HTTP_ADDR = 127.0.0.1
HTTP_PORT = %[2]s
ROOT_URL = %[3]s/
DISABLE_SSH = true
SSH_CREATE_AUTHORIZED_KEYS_FILE = false
SSH_ROOT_PATH = %[1]s/ssh
OFFLINE_MODE = true
LFS_START_SERVER = false
APP_DATA_PATH = %[1]s/data
STATIC_ROOT_PATH = %[4]s

[database]
DB_TYPE = sqlite3
PATH = %[1]s/data/gitea.db
SQLITE_JOURNAL_MODE = WAL

[repository]
ROOT = %[1]s/repositories
DEFAULT_BRANCH = main
DISABLE_MIGRATIONS = true

[security]
INSTALL_LOCK = true
SECRET_KEY = %[5]s
INTERNAL_TOKEN = %[6]s

[service]
DISABLE_REGISTRATION = true

[mailer]
ENABLED = false

[oauth2]
ENABLED = false
JWT_SECRET = %[7]s

[indexer]
ISSUE_INDEXER_TYPE = db
REPO_INDEXER_ENABLED = false

[actions]
ENABLED = false

[packages]
ENABLED = false

[webhook]
ALLOWED_HOST_LIST = loopback

[cron.update_checker]
ENABLED = false

[log]
MODE = console
LEVEL = Warn
`

// writeConfig writes the server's app.ini, serving the assets in static.
func (g *Gitea) writeConfig(static string) error {
	_, port, err := net.SplitHostPort(g.addr)
	if err != nil {
		return fmt.Errorf("gitea address: %w", err)
	}
	jwtSecret := make([]byte, 32) // the length Gitea wants
	_, _ = rand.Read(jwtSecret)   // crypto/rand's Read never fails
	ini := fmt.Sprintf(giteaConfig, g.dir, port, g.URL(), static, rand.Text(), rand.Text()+rand.Text(),
		base64.RawURLEncoding.EncodeToString(jwtSecret))
	if err := os.WriteFile(g.config(), []byte(ini), 0o600); err != nil {
		return fmt.Errorf("write gitea config: %w", err)
	}
	return nil
}

func (g *Gitea) config() string { return filepath.Join(g.dir, "app.ini") }

// args are gitea's command-line arguments for the subcommand args, on this server's config.
func (g *Gitea) args(args ...string) []string {
	return append([]string{"--config", g.config(), "--work-path", g.dir}, args...)
}

// cli runs a gitea subcommand on this server's config and returns its output.
func (g *Gitea) cli(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, g.bin, g.args(args...)...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("gitea %s: %w", args[0], err)
	}
	return out, nil
}

// newToken creates an all-scopes API token for user, signing in with the password.
func (g *Gitea) newToken(tb testing.TB, user string) string {
	tb.Helper()
	c := g.client(tb, gitea.SetBasicAuth(user, giteaPassword))
	t, _, err := c.CreateAccessToken(gitea.CreateAccessTokenOption{
		Name: "tests", Scopes: []gitea.AccessTokenScope{gitea.AccessTokenScopeAll},
	})
	if err != nil {
		tb.Fatalf("create a gitea token for %s: %v", user, err)
	}
	return t.Token
}

func (g *Gitea) client(tb testing.TB, auth gitea.ClientOption) *gitea.Client {
	tb.Helper()
	c, err := gitea.NewClient(g.URL(), auth)
	if err != nil {
		tb.Fatalf("gitea client: %v", err)
	}
	return c
}

// URL is the server's address, http://127.0.0.1:port, without a trailing slash.
func (g *Gitea) URL() string { return "http://" + g.addr }

// AdminToken is the all-scopes API token of GiteaAdmin.
func (g *Gitea) AdminToken() string { return g.token }

// Client returns a new API client that acts as GiteaAdmin.
func (g *Gitea) Client(tb testing.TB) *gitea.Client {
	tb.Helper()
	return g.client(tb, gitea.SetToken(g.token))
}

// CreateUser creates the ordinary user name and returns an all-scopes API token for it, which is
// also its password for Git over HTTP (see GitURL).
func (g *Gitea) CreateUser(tb testing.TB, name string) (token string) {
	tb.Helper()
	mustChange := false
	if _, _, err := g.Client(tb).AdminCreateUser(gitea.CreateUserOption{
		Username: name, Email: name + "@example.com", Password: giteaPassword, MustChangePassword: &mustChange,
	}); err != nil {
		tb.Fatalf("create gitea user %s: %v", name, err)
	}
	return g.newToken(tb, name)
}

// CreateRepo creates the repository owner/name (owner a user, GiteaAdmin for instance) with an
// initial commit (a README) on its default branch main, and returns its clone URL.
func (g *Gitea) CreateRepo(tb testing.TB, owner, name string) (cloneURL string) {
	tb.Helper()
	r, _, err := g.Client(tb).AdminCreateRepo(owner, gitea.CreateRepoOption{
		Name: name, AutoInit: true, Readme: "Default", DefaultBranch: "main",
	})
	if err != nil {
		tb.Fatalf("create gitea repository %s/%s: %v", owner, name, err)
	}
	return r.CloneURL
}

// AddCollaborator gives user permission (read, write or admin) on the repository owner/repo.
func (g *Gitea) AddCollaborator(tb testing.TB, owner, repo, user, permission string) {
	tb.Helper()
	mode := gitea.AccessMode(permission)
	if _, err := g.Client(tb).AddCollaborator(owner, repo, user, gitea.AddCollaboratorOption{Permission: &mode}); err != nil {
		tb.Fatalf("add %s to %s/%s: %v", user, owner, repo, err)
	}
}

// ProtectBranch protects branch of owner/repo against every direct push, administrators' too: the
// server's pre-receive hook refuses them, and only merging a pull request changes the branch.
func (g *Gitea) ProtectBranch(tb testing.TB, owner, repo, branch string) {
	tb.Helper()
	if _, _, err := g.Client(tb).CreateBranchProtection(owner, repo, gitea.CreateBranchProtectionOption{
		RuleName: branch, EnablePush: false,
	}); err != nil {
		tb.Fatalf("protect %s of %s/%s: %v", branch, owner, repo, err)
	}
}

// MergePull merges pull request number of owner/repo as GiteaAdmin in style (merge, squash,
// rebase, rebase-merge or fast-forward-only), trying until Gitea's background check finds it
// mergeable and the merge is done: a merge during the check is refused.
func (g *Gitea) MergePull(tb testing.TB, owner, repo string, number int64, style string) {
	tb.Helper()
	c := g.Client(tb)
	// Just after a push to the head (a rebuild), Gitea can still say mergeable from before and
	// refuse the merge.
	Eventually(tb, giteaMergeWait, fmt.Sprintf("%s/%s#%d merged (%s)", owner, repo, number, style), func() (bool, string) {
		pr, _, err := c.GetPullRequest(owner, repo, number)
		if err != nil {
			return false, err.Error()
		}
		if !pr.Mergeable {
			return false, "mergeable is false"
		}
		merged, _, err := c.MergePullRequest(owner, repo, number, gitea.MergePullRequestOption{Style: gitea.MergeStyle(style)})
		return err == nil && merged, fmt.Sprintf("merged %v, %v", merged, err)
	})
}

// Pulls lists the pull requests of owner/repo in state (open, closed or all).
func (g *Gitea) Pulls(tb testing.TB, owner, repo, state string) []*gitea.PullRequest {
	tb.Helper()
	c := g.Client(tb)
	var all []*gitea.PullRequest
	for page := 1; ; page++ {
		prs, resp, err := c.ListRepoPullRequests(owner, repo, gitea.ListPullRequestsOptions{
			ListOptions: gitea.ListOptions{Page: page, PageSize: 50}, State: gitea.StateType(state),
		})
		if err != nil {
			tb.Fatalf("list the pull requests of %s/%s: %v", owner, repo, err)
		}
		all = append(all, prs...)
		if resp.NextPage == 0 {
			return all
		}
	}
}

// BranchExists reports whether owner/repo has branch.
func (g *Gitea) BranchExists(tb testing.TB, owner, repo, branch string) bool {
	tb.Helper()
	_, resp, err := g.Client(tb).GetRepoBranch(owner, repo, branch)
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return false
	}
	if err != nil {
		tb.Fatalf("get branch %s of %s/%s: %v", branch, owner, repo, err)
	}
	return true
}

// GitURL is the clone URL of owner/repo with user and token as its HTTP basic credentials, for
// plain git commands.
func (g *Gitea) GitURL(owner, repo, user, token string) string {
	u := url.URL{Scheme: "http", Host: g.addr, User: url.UserPassword(user, token), Path: "/" + owner + "/" + repo + ".git"}
	return u.String()
}
