package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/ctl"
	"github.com/configbutler/gitops-reverser/testenv"
)

// TestAMistypedCommandDoesNotStartTheDaemon: an argument that is not a command is a
// configuration error (exit code 2), not a daemon started with the user's kubeconfig.
func TestAMistypedCommandDoesNotStartTheDaemon(t *testing.T) {
	var started bool
	err := runWith(context.Background(), []string{"gitops-reverser", "proposal-list"}, logged(t), logged(t),
		func(context.Context, Config) error { started = true; return nil })
	var cfgErr *ConfigError
	if started || !errors.As(err, &cfgErr) || ExitCode(err) != 2 || !strings.Contains(err.Error(), `unknown command "proposal-list"`) {
		t.Errorf("started %v, err %v (exit %d); want a ConfigError naming the command", started, err, ExitCode(err))
	}
}

// TestCommandsRunInsteadOfTheDaemon: `gitops-reverser status` runs the command, as the user of
// the kubeconfig it is given, and its failure keeps the command's exit code (1, not 2).
func TestCommandsRunInsteadOfTheDaemon(t *testing.T) {
	planes.Lend(t)
	w := newCommandsWorld(t)
	var started bool
	daemon := func(context.Context, Config) error { started = true; return nil }
	var stdout bytes.Buffer
	err := runWith(context.Background(), []string{"gitops-reverser", "proposals", "list", "-n", w.ns, "--kubeconfig", w.alice}, &stdout, logged(t), daemon)
	if err != nil || started || !strings.Contains(stdout.String(), "web-replicas") {
		t.Errorf("proposals list: err %v, daemon started %v, stdout %q", err, started, stdout.String())
	}
	err = runWith(context.Background(), []string{"gitops-reverser", "proposals", "approve", "web-replicas", "-n", w.ns, "--kubeconfig", w.mallory},
		logged(t), logged(t), daemon)
	if started || ExitCode(err) != 1 || !strings.Contains(fmt.Sprint(err), "Forbidden") {
		t.Errorf("approve as mallory: err %v (exit %d), daemon started %v; want 1 and Forbidden", err, ExitCode(err), started)
	}
}

// TestKubectlPluginRunsTheCommands: the binary installed as kubectl-gitops_reverser on PATH is
// what the real `kubectl gitops-reverser` runs, and it runs the commands, never the daemon; its
// refusals exit with code 1 and the apiserver's reason on stderr.
func TestKubectlPluginRunsTheCommands(t *testing.T) {
	planes.Lend(t)
	w := newCommandsWorld(t)
	bins, err := testenv.EnsureBinaries(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(daemonBin, filepath.Join(dir, ctl.PluginName)); err != nil {
		t.Fatal(err)
	}
	kubectl := func(kubeconfig string, args ...string) (stdout, stderr string, code int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bins.Kubectl, append([]string{"gitops-reverser"}, args...)...)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(filepath.ListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+kubeconfig)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		t.Logf("kubectl gitops-reverser %s\n-> exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), cmd.ProcessState.ExitCode(), out.String(), errOut.String())
		return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
	}

	if stdout, _, code := kubectl(w.alice, "proposals", "list", "-n", w.ns); code != 0 || !strings.Contains(stdout, "web-replicas") {
		t.Errorf("proposals list as alice: exit %d, stdout %q", code, stdout)
	}
	if stdout, _, code := kubectl(w.alice, "proposals", "approve", "web-replicas", "-n", w.ns); code != 0 || !strings.Contains(stdout, "approved by alice") {
		t.Errorf("approve as alice: exit %d, stdout %q", code, stdout)
	}
	if _, stderr, code := kubectl(w.mallory, "proposals", "reject", "web-replicas", "-n", w.ns); code != 1 || !strings.Contains(stderr, "error from server (Forbidden)") {
		t.Errorf("reject as mallory: exit %d, stderr %q; want 1 and Forbidden", code, stderr)
	}
	if stdout, _, code := kubectl(w.alice); code != 0 || !strings.Contains(stdout, "kubectl gitops-reverser") || !strings.Contains(stdout, "proposals") {
		t.Errorf("no command: exit %d, stdout %q; want the help", code, stdout)
	}
}

// commandsWorld is a namespace with one Pending Proposal, which alice may decide and mallory
// may not see, and their kubeconfigs.
type commandsWorld struct {
	ns, alice, mallory string
}

func newCommandsWorld(t *testing.T) commandsWorld {
	t.Helper()
	cp := planes.Of(t)
	ctx := context.Background()
	if err := crds.Install(ctx, cp.AdminConfig(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cp.AdminConfig())
	ns := strings.ToLower(t.Name())
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := crds.ToUnstructured(&crds.Proposal{ObjectMeta: metav1.ObjectMeta{Name: "web-replicas", Namespace: ns},
		Spec: crds.ProposalSpec{DestinationRef: crds.LocalReference{Name: "prod"}, Change: crds.ChangeUpdate,
			Target: crds.ProposalTarget{APIVersion: "apps/v1", Kind: "Deployment", Resource: "deployments", Namespace: ns, Name: "web"},
			Path:   "clusters/prod/web.yaml", SourceCommit: strings.Repeat("a", 40), Desired: "kind: Deployment\n", Diff: "-a\n+b\n",
			LiveResourceVersion: "1", LiveDigest: strings.Repeat("c", 64)}})
	if err != nil {
		t.Fatal(err)
	}
	admin := dynamic.NewForConfigOrDie(cp.AdminConfig()).Resource(crds.Proposals).Namespace(ns)
	if _, err := admin.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // no later test's page, metrics or start sees it
		_ = admin.Delete(context.Background(), p.GetName(), metav1.DeleteOptions{})
	})
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reviewer", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{crds.Group}, Resources: []string{"proposals"}, Verbs: []string{"get", "list", "patch"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice-reviews", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	proposals := dynamic.NewForConfigOrDie(cp.UserConfig("alice")).Resource(crds.Proposals).Namespace(ns)
	testenv.Eventually(t, time.Minute, "alice may list proposals", func() (bool, string) {
		_, err := proposals.List(ctx, metav1.ListOptions{})
		return err == nil, fmt.Sprint(err)
	})
	w := commandsWorld{ns: ns, alice: filepath.Join(t.TempDir(), "alice"), mallory: filepath.Join(t.TempDir(), "mallory")}
	if err := cp.WriteUserKubeconfig(w.alice, "alice", ""); err != nil {
		t.Fatal(err)
	}
	if err := cp.WriteUserKubeconfig(w.mallory, "mallory", ""); err != nil {
		t.Fatal(err)
	}
	return w
}

// logged is a writer that logs what a command printed.
func logged(t *testing.T) *bytes.Buffer {
	var b bytes.Buffer
	t.Cleanup(func() {
		if b.Len() > 0 {
			t.Logf("printed:\n%s", b.String())
		}
	})
	return &b
}
