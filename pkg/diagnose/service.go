package diagnose

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/rayctl/rayctl/pkg/chain"
)

// (j) A RayService's hops past its cluster: the Serve config deployed to the head's dashboard, every
// application RUNNING, and the serve Service with endpoints.
func (d *diag) checkService() []Check {
	s := d.subject(KindRayService)
	if s == nil {
		return nil
	}
	rs := d.in.Service
	st := &rs.Status
	c := Check{Subject: s.Subject, Status: Pass}
	c.Evidence = append(c.Evidence, fmt.Sprintf("serviceStatus=%q active=%q pending=%q numServeEndpoints=%d",
		st.ServiceStatus, st.ActiveServiceStatus.RayClusterName, st.PendingServiceStatus.RayClusterName, st.NumServeEndpoints))
	for _, cond := range st.Conditions {
		c.Evidence = append(c.Evidence, fmt.Sprintf("condition %s=%s reason=%s message=%q", cond.Type, cond.Status, cond.Reason, cond.Message))
	}
	var deploys []*chain.Event
	if ctrl := d.controller(KindRayService); ctrl != nil {
		for _, e := range d.find(ctrl.Name, chain.DashboardCall, KindRayService, s.Namespace, s.Name) {
			if e.IsCall(http.MethodPut) {
				deploys = append(deploys, e)
			}
		}
	}
	for _, e := range deploys[max(0, len(deploys)-3):] {
		c.Evidence = append(c.Evidence, "Serve deploy: "+line(e))
	}
	ready := meta.FindStatusCondition(st.Conditions, string(rayv1.RayServiceReady))
	apps, cluster := st.ActiveServiceStatus.Applications, st.ActiveServiceStatus.RayClusterName
	if st.PendingServiceStatus.RayClusterName != "" {
		apps, cluster = st.PendingServiceStatus.Applications, st.PendingServiceStatus.RayClusterName
	}
	describe := "rayctl kubectl describe rayservice " + s.Name + " -n " + s.Namespace
	var rayBad []string
	if r := d.in.Ray; r != nil {
		if r.Error != "" {
			c.Evidence = append(c.Evidence, fmt.Sprintf("Serve (%s): %s", r.Source, r.Error))
		}
		for _, n := range r.sortedApps() {
			a := r.Applications[n]
			c.Evidence = append(c.Evidence, fmt.Sprintf("Serve (%s): application %s %s%s", r.Source, n, a.Status, suffix(a.Message)))
			if a.Status != string(rayv1.ApplicationStatusEnum.RUNNING) {
				rayBad = append(rayBad, fmt.Sprintf("%s is %s%s", n, a.Status, suffix(a.Message)))
			}
		}
	}
	switch {
	case ready != nil && ready.Reason == string(rayv1.RayServiceValidationFailed):
		c.Status, c.Cause = Fail, CauseServiceInvalid
		c.Summary = "the RayService's spec is invalid: " + ready.Message
		c.Fix = "fix the spec (kubectl edit or apply); the controller acts on the next generation"
	case cluster == "":
		c.Summary = "the RayService has no RayCluster yet: its controller names one and creates it on its next reconciles"
	case d.in.Cluster == nil:
		c.Summary = fmt.Sprintf("the RayService's RayCluster %s does not exist yet: its controller creates it", cluster)
	case d.in.Pod == nil || !podutils.IsPodReady(d.in.Pod):
		c.Status, c.Cause = Fail, CauseClusterNotReady
		c.Summary = fmt.Sprintf("the Serve config waits for RayCluster %s's head Pod to be running and ready", cluster)
		c.Fix = "see g for what keeps the head from ready"
	case len(apps) == 0 && len(rayBad) > 0:
		c.Status, c.Cause = Fail, CauseServeAppNotRunning
		c.Summary = fmt.Sprintf("Serve says its applications on RayCluster %s are not all RUNNING: %s", cluster, strings.Join(rayBad, "; "))
		c.Fix = "see the Serve logs of the head (rayctl kubectl logs " + d.headName() + " -n " + s.Namespace + ") and " + describe
	case len(apps) == 0:
		c.Status, c.Cause = Fail, CauseServeNotDeployed
		why := "no application is reported yet"
		if n := len(deploys); n > 0 && (deploys[n-1].Error != "" || callCode(deploys[n-1]) >= 400) {
			why = fmt.Sprintf("the last deploy failed (%s → %s)", callText(deploys[n-1]), strings.TrimSpace(fmt.Sprintf("%s %d", deploys[n-1].Error, callCode(deploys[n-1]))))
		}
		if ready != nil && strings.Contains(ready.Message, ": ") {
			// The controller's own account, with what Ray answered.
			why = strings.TrimPrefix(ready.Message, "RayService is initializing: ")
		}
		c.Summary = fmt.Sprintf("the Serve config is not running on RayCluster %s: %s", cluster, why)
		c.Fix = "see the RayService's FailedToUpdateServeApplications events (" + describe + ") for what Ray said of spec.serveConfigV2"
	default:
		var bad []string
		names := make([]string, 0, len(apps))
		for n := range apps {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			a := apps[n]
			c.Evidence = append(c.Evidence, fmt.Sprintf("application %s on %s: %s %s", n, cluster, a.Status, a.Message))
			if a.Status != rayv1.ApplicationStatusEnum.RUNNING {
				bad = append(bad, fmt.Sprintf("%s is %s%s", n, a.Status, suffix(a.Message)))
			}
		}
		switch {
		case len(bad) > 0:
			c.Status, c.Cause = Fail, CauseServeAppNotRunning
			c.Summary = fmt.Sprintf("Serve applications on RayCluster %s are not all RUNNING: %s", cluster, strings.Join(bad, "; "))
			c.Fix = "see the Serve logs of the head (rayctl kubectl logs " + d.headName() + " -n " + s.Namespace + ") and " + describe
		case st.NumServeEndpoints == 0:
			c.Status, c.Cause = Fail, CauseNoServeEndpoints
			c.Summary = fmt.Sprintf("every application runs on RayCluster %s, but the serve Service has no ready endpoint", cluster)
			c.Fix = "the serve Service selects the cluster's Pods labelled ray.io/serve=true: the head gets the label once its Serve proxy answers /-/healthz on the serve port, a worker once its readiness probe passes"
		default:
			c.Summary = fmt.Sprintf("%d application(s) RUNNING on RayCluster %s; the serve Service has %d endpoint(s)", len(apps), cluster, st.NumServeEndpoints)
		}
	}
	return []Check{c}
}

// suffix is ": msg", or "" for no message.
func suffix(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}
