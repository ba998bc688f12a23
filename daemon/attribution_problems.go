package daemon

import (
	"errors"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The problems that degrade attribution, each with the fix an operator can apply. The error
// text goes into what, so the log and /readyz show the apiserver's own words too.

// unreachableProblem: outside a cluster the webhook's Service does not lead to this process, and
// registering it would only make the apiserver call nobody.
func unreachableProblem(cfg WebhookConfig) problem {
	return problem{
		what:  "running outside the cluster without --" + keyWebhookURL + ": the apiserver cannot reach this process, so no webhook is registered",
		fix:   "set --" + keyWebhookURL + "=https://<address the apiserver can reach>:" + strconv.Itoa(webhookPort(cfg)),
		final: true,
	}
}

func clientCAProblem(cfg WebhookConfig, err error) problem {
	return problem{
		what: fmt.Sprintf("cannot use --%s: %v", keyWebhookClientCAFile, err),
		fix:  fmt.Sprintf("make %s a readable PEM file of the CA certificates that sign the apiserver's webhook client certificate", cfg.ClientCAFile),
	}
}

func certDirProblem(cfg WebhookConfig, err error) problem {
	return problem{
		what: fmt.Sprintf("cannot load the webhook certificate of --%s: %v", keyWebhookCertDir, err),
		fix:  fmt.Sprintf("put tls.crt, tls.key and ca.crt into %s (e.g. mount the cert-manager Secret there), or leave --%s empty to have the daemon manage its own", cfg.CertDir, keyWebhookCertDir),
	}
}

// secretProblem is a failure to read or write the self-managed certificate Secret.
func secretProblem(namespace string, err error) problem {
	p := problem{what: fmt.Sprintf("cannot keep the webhook certificate Secret: %v", err)}
	switch {
	case isNamespaceNotFound(err):
		p.what = fmt.Sprintf("the namespace %s does not exist, so the webhook certificate Secret cannot be kept there: %v", namespace, err)
		p.fix = fmt.Sprintf("create the namespace %s or set --%s", namespace, keyNamespace)
	case apierrors.IsForbidden(err):
		p.fix = fmt.Sprintf("grant the daemon get, create and update on secrets in the namespace %s (the shipped Role does), or give it a certificate with --%s", namespace, keyWebhookCertDir)
	default:
		p.fix = "check that the Kubernetes API answers; the daemon retries"
	}
	return p
}

func listenProblem(cfg WebhookConfig, err error) problem {
	return problem{
		what: fmt.Sprintf("cannot serve the webhook: %v", err),
		fix:  fmt.Sprintf("free %s or set --%s to a free address", cfg.BindAddress, keyWebhookBindAddress),
	}
}

func registrationProblem(name string, err error) problem {
	p := problem{what: fmt.Sprintf("cannot register the webhook: %v", err)}
	if apierrors.IsForbidden(err) {
		p.fix = "grant the daemon apply (create and patch) on validatingwebhookconfigurations named " + name + " (the shipped ClusterRole does)"
	} else {
		p.fix = "check that the Kubernetes API answers; the daemon retries"
	}
	return p
}

// isNamespaceNotFound tells a missing namespace from a missing object inside it.
func isNamespaceNotFound(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	details := status.Status().Details
	return details != nil && details.Kind == "namespaces"
}
