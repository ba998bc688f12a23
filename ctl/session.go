package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/urfave/cli/v2"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/kube"
)

// requestTimeout bounds each request to the apiserver, so an unreachable cluster fails instead
// of hanging.
const requestTimeout = 30 * time.Second

// errNoKubeconfig: the commands never fall back to a Pod's service account, as kubectl would.
var errNoKubeconfig = errors.New("no kubeconfig found: give --kubeconfig or set $KUBECONFIG (commands act as you, never with a Pod's service account)")

// session is one command's connection to the cluster as the user, and where it writes.
type session struct {
	dyn    dynamic.Interface
	config *rest.Config // as the user, for what dyn does not do (restore's discovery)
	// namespace is the one to read and write in; "" with allNamespaces.
	namespace     string
	allNamespaces bool
	// output is "", outputWide, outputYAML or outputJSON.
	output string
	// destination and phase filter proposals list; "" means any.
	destination, phase string
	stdout, stderr     io.Writer
}

// newSession loads the user's kubeconfig with kubectl's rules: --kubeconfig, else $KUBECONFIG
// (a list of files, merged), else ~/.kube/config; --context, else the current context; -n, else
// the context's namespace, else default. Unlike kubectl it never falls back to a Pod's service
// account: run inside the daemon's Pod, that would act as the daemon.
func newSession(c *cli.Context) (*session, error) {
	s := &session{
		allNamespaces: c.Bool(flagAllNamespaces),
		output:        c.String(flagOutput),
		destination:   c.String(flagDestination),
		phase:         c.String(flagPhase),
		stdout:        c.App.Writer,
		stderr:        c.App.ErrWriter,
	}
	if !slices.Contains([]string{"", outputWide, outputYAML, outputJSON}, s.output) {
		return nil, usageErrorf("--output must be %s, %s or %s, got %q", outputWide, outputYAML, outputJSON, s.output)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.String(flagKubeconfig)
	overrides := &clientcmd.ConfigOverrides{CurrentContext: c.String(flagContext)}
	overrides.Context.Namespace = c.String(flagNamespace)
	raw, err := rules.Load()
	if err != nil {
		return nil, &exitError{err: fmt.Errorf("load the kubeconfig: %w", err), code: exitFailed}
	}
	loader := clientcmd.NewNonInteractiveClientConfig(*raw, overrides.CurrentContext, overrides, rules)
	cfg, err := loader.ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, &exitError{err: errNoKubeconfig, code: exitFailed}
	}
	if err != nil {
		return nil, &exitError{err: fmt.Errorf("kubeconfig: %w", err), code: exitFailed}
	}
	if s.namespace, _, err = loader.Namespace(); err != nil {
		return nil, &exitError{err: fmt.Errorf("kubeconfig: %w", err), code: exitFailed}
	}
	if s.allNamespaces {
		s.namespace = ""
	}
	cfg.Timeout = requestTimeout
	cfg.WarningHandler = rest.NewWarningWriter(s.stderr, rest.WarningWriterOptions{Deduplicate: true})
	s.config = cfg
	if s.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, &exitError{err: fmt.Errorf("build a client: %w", err), code: exitFailed}
	}
	return s, nil
}

// whoami asks the apiserver who the user is (a SelfSubjectReview), as it will see them in the
// requests that follow: the reviewer a decision names.
func (s *session) whoami(ctx context.Context) (crds.Reviewer, error) {
	review, err := kube.For(s.dyn, kube.SelfSubjectReviews, "").Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return crds.Reviewer{}, failed("ask the apiserver who you are (a SelfSubjectReview, Kubernetes 1.28 or later)", err)
	}
	u := review.Status.UserInfo
	if u.Username == "" {
		return crds.Reviewer{}, errors.New("the apiserver did not say who you are (a SelfSubjectReview without a username)")
	}
	return crds.Reviewer{Username: u.Username, UID: u.UID, Groups: u.Groups}, nil
}

// where names the namespace of the session for messages.
func (s *session) where() string {
	if s.namespace == "" {
		return "any namespace"
	}
	return s.namespace + " namespace"
}

// failed says what failed and, for an answer of the apiserver, its reason as kubectl does
// ("error from server (Forbidden): ..."). A resource the apiserver does not know means the
// CRDs are not installed.
func failed(doing string, err error) error {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Reason == "" {
		return fmt.Errorf("%s: %w", doing, err)
	}
	st := status.Status()
	if kindNotServed(err) {
		return fmt.Errorf("%s: error from server (%s): %w (are the configbutler.ai CRDs installed?)", doing, st.Reason, err)
	}
	return fmt.Errorf("%s: error from server (%s): %w", doing, st.Reason, err)
}
