package daemon

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// TestReceiversMakeDestinationsReconcileNow runs the daemon with its receiver server: a signed
// GitHub push for the destination's repository makes a write-back run at once (a SyncRun with
// trigger "receiver", no waiting for the 5-minute interval); a tampered one is refused and
// triggers nothing; a GitRepoConfig that asks for a receiver gets one whose token works.
func TestReceiversMakeDestinationsReconcileNow(t *testing.T) {
	planes.Lend(t)
	addr := testenv.FreeAddr(t)
	w := newWBWorld(t, "rcv-e2e", crds.WriteBack{Enabled: true}, nil, "--receiver-bind-address", addr, "--namespace", "rcv-e2e") // generated receivers live in the daemon's namespace
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: w.ns}, StringData: map[string]string{"token": "s3cret-token"}}
	if _, err := w.kube.CoreV1().Secrets(w.ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.receiverFor(crds.ReceiverGitHub, "github")
	path := w.receiverPath("github")

	push := w.payload("github-commit-event.json", func(p map[string]any) {
		p["repository"].(map[string]any)["clone_url"] = w.srv.RepoURL("state")
	})
	sign := func(body []byte, token string) string {
		mac := hmac.New(sha256.New, []byte(token))
		mac.Write(body)
		return "sha256=" + hex.EncodeToString(mac.Sum(nil))
	}
	runs := w.runsBy("receiver")
	w.pushedByAPerson("by-github")
	if got := w.post(addr, path, push, map[string]string{"X-GitHub-Event": "push", "X-GitHub-Delivery": "d-1", "X-Hub-Signature-256": sign(push, "wrong")}); got != http.StatusForbidden {
		t.Errorf("tampered signature: %d, want 403", got)
	}
	if got := w.post(addr, path, push, map[string]string{"X-GitHub-Event": "push", "X-GitHub-Delivery": "d-2", "X-Hub-Signature-256": sign(push, "s3cret-token")}); got != http.StatusAccepted {
		t.Fatalf("signed push: %d, want 202", got)
	}
	w.waitRun("receiver", runs)
	if got := w.d.Metric(t, "gitops_reverser_receiver_triggers_total"); got != 1 {
		t.Errorf("receiver_triggers_total = %v, want 1 (the tampered push triggered nothing)", got)
	}

	// A CDEvent (a conformance example naming this repository) with a bearer token.
	w.receiverFor(crds.ReceiverCDEvents, "cd")
	cdPath := w.receiverPath("cd")
	event := w.cdevent("change_merged.json", w.srv.RepoURL("state"))
	runs = w.runsBy("receiver")
	w.pushedByAPerson("by-cdevents")
	cdHeaders := map[string]string{"Authorization": "Bearer s3cret-token", "ce-id": "cd-1", "ce-specversion": "1.0",
		"ce-source": "/event/source/123", "ce-type": "dev.cdevents.change.merged.0.3.0"}
	if got := w.post(addr, cdPath, event, cdHeaders); got != http.StatusAccepted {
		t.Fatalf("CDEvent: %d, want 202", got)
	}
	w.waitRun("receiver", runs)
	cdHeaders["ce-id"], cdHeaders["ce-type"] = "cd-2", "dev.cdevents.change.created.0.3.0"
	if got := w.post(addr, cdPath, event, cdHeaders); got != http.StatusBadRequest {
		t.Errorf("CDEvent whose ce-type is not its context.type: %d, want 400", got)
	}

	// A generated receiver: its token, in the generated Secret, verifies a GitLab push.
	w.patch(crds.GitRepoConfigs, "repo", map[string]any{"spec": map[string]any{"receiver": map[string]any{"type": "gitlab"}}})
	var generated crds.GeneratedReceiverStatus
	testenv.Eventually(t, time.Minute, "generated receiver reported", func() (bool, string) {
		got, err := w.dyn.Resource(crds.GitRepoConfigs).Namespace(w.ns).Get(ctx, "repo", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		grc, err := crds.FromUnstructured[crds.GitRepoConfig](got)
		if err != nil || grc.Status.Receiver == nil || grc.Status.Receiver.WebhookPath == "" {
			return false, fmt.Sprintf("status.receiver = %+v %v", grc.Status.Receiver, err)
		}
		generated = *grc.Status.Receiver
		return true, ""
	}, w.d.FailFast())
	tokenSecret, err := w.kube.CoreV1().Secrets(w.ns).Get(ctx, generated.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gitlab := w.payload("gitlab-event.json", func(p map[string]any) {
		p["project"].(map[string]any)["git_http_url"] = w.srv.RepoURL("state")
	})
	runs = w.runsBy("receiver")
	w.pushedByAPerson("by-gitlab")
	headers := map[string]string{"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": string(tokenSecret.Data["token"])}
	testenv.Eventually(t, time.Minute, "the generated receiver serving", func() (bool, string) {
		got := w.post(addr, generated.WebhookPath, gitlab, headers)
		return got == http.StatusAccepted, fmt.Sprintf("status %d", got)
	}, w.d.FailFast())
	w.waitRun("receiver", runs)
}

// pushedByAPerson pushes a new ConfigMap's file as alice, which a Git host's push event would
// announce: the run the event makes finds that edit, so it is recorded as a SyncRun (a run that
// finds none is recorded at most once an hour).
func (w *wbWorld) pushedByAPerson(name string) {
	w.t.Helper()
	w.edit(map[string]string{w.cmPath(name): fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  k: v\n", name, w.ns)})
}

// receiverFor creates a Receiver of the type for the destination, with the token of Secret "hook".
func (w *wbWorld) receiverFor(typ, name string) {
	w.t.Helper()
	u, err := crds.ToUnstructured(&crds.Receiver{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		Spec: crds.ReceiverSpec{Type: typ, SecretRef: crds.LocalReference{Name: "hook"},
			Resources: []crds.ReceiverResource{{Kind: crds.KindGitDestination, Name: "dest"}}},
	})
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.dyn.Resource(crds.Receivers).Namespace(w.ns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// cdevent reads a CDEvents conformance example and makes its repository repoURL.
func (w *wbWorld) cdevent(file, repoURL string) []byte {
	w.t.Helper()
	data, err := os.ReadFile("../testdata/cdevents/conformance/" + file)
	if err != nil {
		w.t.Fatal(err)
	}
	var e map[string]any
	if err := json.Unmarshal(data, &e); err != nil {
		w.t.Fatal(err)
	}
	content := e["subject"].(map[string]any)["content"].(map[string]any)
	content["repository"] = map[string]any{"id": "state", "source": repoURL}
	out, err := json.Marshal(e)
	if err != nil {
		w.t.Fatal(err)
	}
	return out
}

// receiverPath waits until the Receiver reports its webhook path and is Ready.
func (w *wbWorld) receiverPath(name string) string {
	w.t.Helper()
	var path string
	testenv.Eventually(w.t, time.Minute, "receiver "+name+" ready", func() (bool, string) {
		got, err := w.dyn.Resource(crds.Receivers).Namespace(w.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		r, err := crds.FromUnstructured[crds.Receiver](got)
		if err != nil {
			return false, err.Error()
		}
		path = r.Status.WebhookPath
		for _, c := range r.Status.Conditions {
			if c.Type == crds.ConditionReady && c.Status == metav1.ConditionTrue && path != "" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("status %+v", r.Status)
	}, w.d.FailFast())
	return path
}

// payload reads a recorded webhook body and lets the test point it at its own repository.
func (w *wbWorld) payload(file string, edit func(map[string]any)) []byte {
	w.t.Helper()
	data, err := os.ReadFile("../testdata/webhooks/" + file)
	if err != nil {
		w.t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(data, &p); err != nil {
		w.t.Fatal(err)
	}
	edit(p)
	out, err := json.Marshal(p)
	if err != nil {
		w.t.Fatal(err)
	}
	return out
}

// post sends a webhook delivery and returns the status code.
func (w *wbWorld) post(addr, path string, body []byte, headers map[string]string) int {
	w.t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// waitRun waits until there are more SyncRuns with the trigger than before.
func (w *wbWorld) waitRun(trigger string, before int) {
	w.t.Helper()
	testenv.Eventually(w.t, time.Minute, "a SyncRun triggered by "+trigger, func() (bool, string) {
		n := w.runsBy(trigger)
		return n > before, fmt.Sprintf("%d runs by %s", n, trigger)
	}, w.d.FailFast())
}

// runsBy counts the SyncRuns with trigger. Counting, not slicing by creation time: two runs of
// one second have the same creationTimestamp, in either order.
func (w *wbWorld) runsBy(trigger string) int {
	n := 0
	for _, r := range w.runs() {
		if r.Spec.Trigger == trigger {
			n++
		}
	}
	return n
}
