package watch

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/kube"
)

// resolveEncryption reads the age recipients of every usable destination with spec.encryption.
// A destination whose recipients cannot be read or are not valid keeps mirroring everything
// else; its Secrets are left out and its condition says why.
func (m *Manager) resolveEncryption(ctx context.Context, dests []*destination) {
	var ready error
	asked := false
	for _, d := range dests {
		enc := d.obj.Spec.Encryption
		if !d.usable || enc == nil {
			continue
		}
		if !asked {
			asked, ready = true, errors.New("this daemon has no sealer")
			if m.opts.Sealer != nil {
				ready = m.opts.Sealer.Ready(ctx)
			}
		}
		if ready != nil {
			d.encryption = notReady("EncryptionUnavailable", "cannot encrypt: %v; Secrets are not mirrored", ready)
			continue
		}
		recipients, err := m.recipients(ctx, d.obj.Namespace, enc)
		if err != nil {
			d.encryption = notReady("EncryptionInvalid", "%v; Secrets are not mirrored until it is fixed", err)
			continue
		}
		d.recipients = recipients
	}
}

// recipients are the destination's age recipients, inline and from its Secret, sorted and unique.
func (m *Manager) recipients(ctx context.Context, namespace string, enc *crds.Encryption) ([]string, error) {
	if enc.Age == nil {
		return nil, fmt.Errorf("spec.encryption.age is missing")
	}
	out := slices.Clone(enc.Age.Recipients)
	if ref := enc.Age.RecipientsSecretRef; ref != nil {
		s, err := kube.For(m.dyn, kube.Secrets, namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("read the recipients Secret %s/%s: %w", namespace, ref.Name, err)
		}
		raw, ok := s.Data[crds.RecipientsKey]
		if !ok {
			return nil, fmt.Errorf("the recipients Secret %s/%s has no key %q", namespace, ref.Name, crds.RecipientsKey)
		}
		for line := range strings.Lines(string(raw)) {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				out = append(out, line)
			}
		}
	}
	for _, r := range out {
		if err := m.opts.Sealer.CheckRecipient(r); err != nil {
			return nil, fmt.Errorf("recipient %q: %w", r, err)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no age recipients")
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// writeCreationRules hands each encrypted destination's worker the .sops.yaml of its base folder
// when it changed (once after a start): people editing its files with sops use the same rule.
func (m *Manager) writeCreationRules(dests []*destination) {
	for _, d := range dests {
		if len(d.recipients) == 0 {
			delete(m.sopsRules, d.name())
			continue
		}
		rules := m.opts.Sealer.CreationRules(d.recipients)
		if m.sopsRules[d.name()] == string(rules) {
			continue
		}
		sink, ok := m.opts.Pool.Sink(d.repo.obj.Spec.RepoURL, d.obj.Lane())
		if !ok {
			continue
		}
		file := path.Join(path.Clean(d.obj.Spec.BaseFolder), ".sops.yaml")
		if err := sink.Enqueue(gitops.Change{Path: file, Content: rules, Summary: "write " + file}); err != nil {
			continue // the worker is stopping: the next reconcile tries again
		}
		m.sopsRules[d.name()] = string(rules)
	}
}

// isSecrets says whether sel is the core Secrets resource.
func isSecrets(sel Selection) bool { return sel.GVR.Group == "" && sel.GVR.Resource == "secrets" }
