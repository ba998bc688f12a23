package ctl

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configbutler/gitops-reverser/crds"
)

// syncNow asks for a write-back run of each GitDestination named now: a merge patch sets the
// annotation crds.AnnotationSyncNow to the current time, a value the daemon has not handled yet.
// It warns when write-back is off there, as the annotation then starts nothing.
func syncNow(ctx context.Context, s *session, names []string) error {
	if len(names) == 0 {
		return usageErrorf("sync needs the NAME of a GitDestination (see status)")
	}
	value, body := crds.SyncNowPatch(time.Now())
	client := s.ourKind(crds.GitDestinations)
	for _, name := range names {
		u, err := client.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
		if err != nil {
			return failed(fmt.Sprintf("annotate gitdestination %s/%s", s.namespace, name), err)
		}
		_, _ = fmt.Fprintf(s.stdout, "gitdestination.%s/%s sync requested (%s=%s)\n", crds.Group, name, crds.AnnotationSyncNow, value)
		d, err := crds.FromUnstructured[crds.GitDestination](u)
		if err != nil {
			return err
		}
		if wb := d.Spec.WriteBack; wb == nil || !wb.Enabled {
			_, _ = fmt.Fprintf(s.stderr, "Warning: write-back is off on gitdestination %s/%s (spec.writeBack.enabled): nothing runs until it is on\n",
				s.namespace, name)
		}
	}
	return nil
}
