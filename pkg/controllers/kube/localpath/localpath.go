// Package localpath is rayctl's default storage, shaped like the local-path provisioner kind and k3s ship:
// a default StorageClass "local-path" whose claims each get a PersistentVolume that is a directory on
// this machine (<volumes dir>/<pv name>), provisioned as soon as the claim is made (binding mode
// Immediate; one node, so there is no placement to wait for), bound both ways, and removed with its
// directory when the claim goes and the reclaim policy is Delete. It also keeps the phases of the volumes
// and claims it binds, as kube-controller-manager's persistent volume binder does for them.
package localpath

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
)

// Name is the controller's name, in logs and metrics.
const Name = "local-path"

const (
	// ClassName is the default StorageClass's name.
	ClassName = "local-path"
	// Provisioner is the class's provisioner name; claims of other provisioners are left alone.
	Provisioner = "rayctl.io/local-path"

	annDefaultClass  = "storageclass.kubernetes.io/is-default-class"
	annProvisionedBy = "pv.kubernetes.io/provisioned-by"
	annBindCompleted = "pv.kubernetes.io/bind-completed"
	annBoundByCtrl   = "pv.kubernetes.io/bound-by-controller"
)

// reconciler provisions, binds and reclaims local-path volumes.
type reconciler struct {
	// client reads through the manager's cache and writes to the API server.
	client client.Client
	// dir is the host directory volumes are made under.
	dir string
	// recorder records events on claims and volumes.
	recorder record.EventRecorder
}

// Setup registers the controller with mgr: the default class made at start, claims (and every unbound
// claim when a class changes) reconciled for provisioning and binding, volumes (and the claims bound to
// them) for phases and reclaiming.
func Setup(mgr ctrl.Manager, env ctrlset.Env) error {
	if env.VolumesDir == "" {
		return fmt.Errorf("%s: no volumes directory", Name)
	}
	r := &reconciler{client: mgr.GetClient(), dir: env.VolumesDir, recorder: env.Recorder}
	if err := mgr.Add(manager.RunnableFunc(r.ensureClass)); err != nil {
		return err
	}
	// A class appearing (the default one is made at start, perhaps after claims) concerns every claim not
	// bound yet.
	toUnboundClaims := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		claims := &corev1.PersistentVolumeClaimList{}
		if err := r.client.List(ctx, claims); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		for _, c := range claims.Items {
			if c.Spec.VolumeName == "" {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}})
			}
		}
		return reqs
	})
	if err := env.Hooks.Sub("claims").NewControllerManagedBy(mgr).
		For(&corev1.PersistentVolumeClaim{}).
		Watches(&storagev1.StorageClass{}, "class appeared", toUnboundClaims).
		Complete(reconcile.Func(r.reconcileClaim)); err != nil {
		return err
	}
	toVolume := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if name := o.(*corev1.PersistentVolumeClaim).Spec.VolumeName; name != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
		}
		return nil
	})
	return env.Hooks.Sub("volumes").NewControllerManagedBy(mgr).
		For(&corev1.PersistentVolume{}).
		Watches(&corev1.PersistentVolumeClaim{}, "claim's volume", toVolume).
		Complete(reconcile.Func(r.reconcileVolume))
}

// ensureClass creates the default StorageClass unless a class of that name exists (a user's stays).
func (r *reconciler) ensureClass(ctx context.Context) error {
	reclaim, binding := corev1.PersistentVolumeReclaimDelete, storagev1.VolumeBindingImmediate
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: ClassName, Annotations: map[string]string{annDefaultClass: "true"}},
		Provisioner:       Provisioner,
		ReclaimPolicy:     &reclaim,
		VolumeBindingMode: &binding,
	}
	if err := r.client.Create(ctx, sc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating StorageClass %s: %w", ClassName, err)
	}
	return nil
}

// reconcileClaim gives a claim without a class the default one, and provisions and binds a volume for a
// claim of this provisioner's class.
func (r *reconciler) reconcileClaim(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.client.Get(ctx, req.NamespacedName, pvc); err != nil || pvc.DeletionTimestamp != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if pvc.Spec.VolumeName != "" {
		return reconcile.Result{}, r.claimBound(ctx, pvc)
	}
	if pvc.Spec.StorageClassName == nil {
		return reconcile.Result{}, r.assignDefaultClass(ctx, pvc)
	}
	sc := &storagev1.StorageClass{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: *pvc.Spec.StorageClassName}, sc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if sc.Provisioner != Provisioner {
		return reconcile.Result{}, nil
	}
	pv, err := r.provision(ctx, pvc, sc)
	if err != nil {
		r.recorder.Event(pvc, corev1.EventTypeWarning, "ProvisioningFailed", err.Error())
		return reconcile.Result{}, err
	}
	r.recorder.Eventf(pvc, corev1.EventTypeNormal, "ProvisioningSucceeded", "Successfully provisioned volume %s at %s", pv.Name, pv.Spec.HostPath.Path)
	if pvc.Annotations == nil {
		pvc.Annotations = map[string]string{}
	}
	pvc.Annotations[annBindCompleted], pvc.Annotations[annBoundByCtrl] = "yes", "yes"
	pvc.Spec.VolumeName = pv.Name
	if err := r.client.Update(ctx, pvc); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.claimBound(ctx, pvc)
}

// assignDefaultClass sets the default class (annotated is-default-class) on a claim that names none, as
// Kubernetes does for claims made before a default class existed.
func (r *reconciler) assignDefaultClass(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	classes := &storagev1.StorageClassList{}
	if err := r.client.List(ctx, classes); err != nil {
		return err
	}
	for _, sc := range classes.Items {
		if sc.Annotations[annDefaultClass] == "true" {
			name := sc.Name
			pvc.Spec.StorageClassName = &name
			return client.IgnoreNotFound(r.client.Update(ctx, pvc))
		}
	}
	return nil
}

// provision makes the volume of a claim: its directory, and a PersistentVolume bound to the claim.
func (r *reconciler) provision(ctx context.Context, pvc *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass) (*corev1.PersistentVolume, error) {
	name := "pvc-" + string(pvc.UID)
	path := filepath.Join(r.dir, name)
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("making the volume's directory: %w", err)
	}
	// Any user in the pod may write to the volume, as with kind's and k3s's local-path volumes.
	if err := os.Chmod(path, 0o777); err != nil {
		return nil, err
	}
	dirType := corev1.HostPathDirectoryOrCreate
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annProvisionedBy: Provisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: pvc.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &dirType}},
			PersistentVolumeReclaimPolicy: *sc.ReclaimPolicy,
			StorageClassName:              sc.Name,
			VolumeMode:                    pvc.Spec.VolumeMode,
			MountOptions:                  sc.MountOptions,
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID, ResourceVersion: pvc.ResourceVersion},
		},
	}
	if err := r.client.Create(ctx, pv); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating PersistentVolume %s: %w", name, err)
		}
		if err := r.client.Get(ctx, types.NamespacedName{Name: name}, pv); err != nil {
			return nil, err
		}
	}
	return pv, r.setVolumePhase(ctx, pv, corev1.VolumeBound)
}

// claimBound reports a claim Bound, with the capacity and access modes of its volume, once that volume
// names it.
func (r *reconciler) claimBound(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	pv := &corev1.PersistentVolume{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return client.IgnoreNotFound(err)
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != pvc.UID || pvc.Status.Phase == corev1.ClaimBound {
		return nil
	}
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.Capacity = pv.Spec.Capacity
	pvc.Status.AccessModes = pv.Spec.AccessModes
	return r.client.Status().Update(ctx, pvc)
}

// reconcileVolume keeps a volume's phase (Available without a claim, Bound to a live claim, Released when
// its claim is gone) and deletes a released volume of this provisioner whose policy is Delete, with its
// directory.
func (r *reconciler) reconcileVolume(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pv := &corev1.PersistentVolume{}
	if err := r.client.Get(ctx, req.NamespacedName, pv); err != nil || pv.DeletionTimestamp != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	ref := pv.Spec.ClaimRef
	if ref == nil {
		return reconcile.Result{}, r.setVolumePhase(ctx, pv, corev1.VolumeAvailable)
	}
	pvc := &corev1.PersistentVolumeClaim{}
	err := r.client.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, pvc)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	if err == nil && (ref.UID == "" || ref.UID == pvc.UID) {
		if pvc.Spec.VolumeName == pv.Name {
			return reconcile.Result{}, r.setVolumePhase(ctx, pv, corev1.VolumeBound)
		}
		return reconcile.Result{}, nil
	}
	if err := r.setVolumePhase(ctx, pv, corev1.VolumeReleased); err != nil {
		return reconcile.Result{}, err
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.Annotations[annProvisionedBy] != Provisioner {
		return reconcile.Result{}, nil
	}
	if hp := pv.Spec.HostPath; hp != nil && filepath.Dir(filepath.Clean(hp.Path)) == filepath.Clean(r.dir) {
		if err := os.RemoveAll(hp.Path); err != nil {
			r.recorder.Eventf(pv, corev1.EventTypeWarning, "VolumeFailedDelete", "removing %s: %v", hp.Path, err)
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, client.IgnoreNotFound(r.client.Delete(ctx, pv))
}

// setVolumePhase writes a volume's phase when it differs.
func (r *reconciler) setVolumePhase(ctx context.Context, pv *corev1.PersistentVolume, phase corev1.PersistentVolumePhase) error {
	if pv.Status.Phase == phase {
		return nil
	}
	pv.Status.Phase = phase
	return client.IgnoreNotFound(r.client.Status().Update(ctx, pv))
}
