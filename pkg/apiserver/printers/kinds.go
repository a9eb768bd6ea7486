package printers

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/sets"
)

const (
	// labelNodeRolePrefix marks a node role in a label key (value ignored).
	labelNodeRolePrefix = "node-role.kubernetes.io/"
	// labelNodeRole names a node role in its value.
	labelNodeRole = "kubernetes.io/role"
	// maxListed is how many endpoints or ports a cell lists before "+ N more...".
	maxListed = 3
)

var serviceSpecDoc = corev1.ServiceSpec{}.SwaggerDoc()

// NewServiceTableConvertor prints services as NAME TYPE CLUSTER-IP
// EXTERNAL-IP PORT(S) AGE, wide SELECTOR.
func NewServiceTableConvertor() *Convertor[*corev1.Service] {
	return New([]metav1.TableColumnDefinition{
		nameColumn(),
		col("Type", "string", serviceSpecDoc["type"]),
		col("Cluster-IP", "string", serviceSpecDoc["clusterIP"]),
		col("External-IP", "string", serviceSpecDoc["externalIPs"]),
		col("Port(s)", "string", serviceSpecDoc["ports"]),
		ageColumn(),
		wideCol("Selector", "string", serviceSpecDoc["selector"]),
	}, func(svc *corev1.Service) []any {
		clusterIP := "<none>"
		if len(svc.Spec.ClusterIPs) > 0 {
			clusterIP = svc.Spec.ClusterIPs[0]
		} else if svc.Spec.ClusterIP != "" {
			clusterIP = svc.Spec.ClusterIP
		}
		ports := servicePorts(svc.Spec.Ports)
		if ports == "" {
			ports = "<none>"
		}
		return []any{svc.Name, string(svc.Spec.Type), clusterIP, serviceExternalIP(svc), ports, Age(svc.CreationTimestamp), labels.FormatLabels(svc.Spec.Selector)}
	})
}

func servicePorts(ports []corev1.ServicePort) string {
	parts := make([]string, len(ports))
	for i, p := range ports {
		if p.NodePort > 0 {
			parts[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
		} else {
			parts[i] = fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		}
	}
	return strings.Join(parts, ",")
}

func serviceExternalIP(svc *corev1.Service) string {
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		if len(svc.Spec.ExternalIPs) > 0 {
			return strings.Join(svc.Spec.ExternalIPs, ",")
		}
		return "<none>"
	case corev1.ServiceTypeLoadBalancer:
		lb := sets.New[string]()
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			if ing.IP != "" {
				lb.Insert(ing.IP)
			} else if ing.Hostname != "" {
				lb.Insert(ing.Hostname)
			}
		}
		all := append(sets.List(lb), svc.Spec.ExternalIPs...)
		if len(all) == 0 {
			return "<pending>"
		}
		return strings.Join(all, ",")
	case corev1.ServiceTypeExternalName:
		return svc.Spec.ExternalName
	}
	return "<unknown>"
}

// NewNodeTableConvertor prints nodes as NAME STATUS ROLES AGE VERSION, wide
// INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME.
func NewNodeTableConvertor() *Convertor[*corev1.Node] {
	info := corev1.NodeSystemInfo{}.SwaggerDoc()
	addrs := corev1.NodeStatus{}.SwaggerDoc()["addresses"]
	return New([]metav1.TableColumnDefinition{
		nameColumn(),
		col("Status", "string", "The status of the node"),
		col("Roles", "string", "The roles of the node"),
		ageColumn(),
		col("Version", "string", info["kubeletVersion"]),
		wideCol("Internal-IP", "string", addrs),
		wideCol("External-IP", "string", addrs),
		wideCol("OS-Image", "string", info["osImage"]),
		wideCol("Kernel-Version", "string", info["kernelVersion"]),
		wideCol("Container-Runtime", "string", info["containerRuntimeVersion"]),
	}, func(n *corev1.Node) []any {
		status := []string{"Unknown"}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				status[0] = "NotReady"
				if c.Status == corev1.ConditionTrue {
					status[0] = "Ready"
				}
			}
		}
		if n.Spec.Unschedulable {
			status = append(status, "SchedulingDisabled")
		}
		roles := sets.New[string]()
		for k, v := range n.Labels {
			if role, ok := strings.CutPrefix(k, labelNodeRolePrefix); ok && role != "" {
				roles.Insert(role)
			} else if k == labelNodeRole && v != "" {
				roles.Insert(v)
			}
		}
		ni := n.Status.NodeInfo
		return []any{n.Name, strings.Join(status, ","), orNone(strings.Join(sets.List(roles), ",")), Age(n.CreationTimestamp), ni.KubeletVersion,
			nodeAddress(n, corev1.NodeInternalIP), nodeAddress(n, corev1.NodeExternalIP),
			orUnknown(ni.OSImage), orUnknown(ni.KernelVersion), orUnknown(ni.ContainerRuntimeVersion)}
	})
}

func nodeAddress(n *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range n.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return "<none>"
}

func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}

// NewNamespaceTableConvertor prints namespaces as NAME STATUS AGE.
func NewNamespaceTableConvertor() *Convertor[*corev1.Namespace] {
	return New([]metav1.TableColumnDefinition{
		nameColumn(), col("Status", "string", "The status of the namespace"), ageColumn(),
	}, func(ns *corev1.Namespace) []any {
		return []any{ns.Name, string(ns.Status.Phase), Age(ns.CreationTimestamp)}
	})
}

// NewConfigMapTableConvertor prints config maps as NAME DATA AGE.
func NewConfigMapTableConvertor() *Convertor[*corev1.ConfigMap] {
	return New([]metav1.TableColumnDefinition{
		nameColumn(), col("Data", "string", corev1.ConfigMap{}.SwaggerDoc()["data"]), ageColumn(),
	}, func(cm *corev1.ConfigMap) []any {
		return []any{cm.Name, int64(len(cm.Data) + len(cm.BinaryData)), Age(cm.CreationTimestamp)}
	})
}

// NewSecretTableConvertor prints secrets as NAME TYPE DATA AGE.
func NewSecretTableConvertor() *Convertor[*corev1.Secret] {
	doc := corev1.Secret{}.SwaggerDoc()
	return New([]metav1.TableColumnDefinition{
		nameColumn(), col("Type", "string", doc["type"]), col("Data", "string", doc["data"]), ageColumn(),
	}, func(s *corev1.Secret) []any {
		return []any{s.Name, string(s.Type), int64(len(s.Data)), Age(s.CreationTimestamp)}
	})
}

// NewServiceAccountTableConvertor prints service accounts as NAME SECRETS AGE.
func NewServiceAccountTableConvertor() *Convertor[*corev1.ServiceAccount] {
	return New([]metav1.TableColumnDefinition{
		nameColumn(), col("Secrets", "string", corev1.ServiceAccount{}.SwaggerDoc()["secrets"]), ageColumn(),
	}, func(sa *corev1.ServiceAccount) []any {
		return []any{sa.Name, int64(len(sa.Secrets)), Age(sa.CreationTimestamp)}
	})
}

var eventDoc = corev1.Event{}.SwaggerDoc()

// eventColumns are shared by core/v1 and events.k8s.io/v1 events, as on a
// real server where both print through the same internal type.
var eventColumns = []metav1.TableColumnDefinition{
	col("Last Seen", "string", eventDoc["lastTimestamp"]),
	col("Type", "string", eventDoc["type"]),
	col("Reason", "string", eventDoc["reason"]),
	col("Object", "string", eventDoc["involvedObject"]),
	wideCol("Subobject", "string", corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]),
	wideCol("Source", "string", eventDoc["source"]),
	col("Message", "string", eventDoc["message"]),
	wideCol("First Seen", "string", eventDoc["firstTimestamp"]),
	wideCol("Count", "string", eventDoc["count"]),
	{Name: "Name", Type: "string", Format: "name", Priority: 1, Description: objectMetaDoc["name"]},
}

// eventCells holds an event's data in the shape both event APIs share.
type eventCells struct {
	name, eventType, reason, message, source string
	object                                   corev1.ObjectReference
	first, last                              metav1.Time
	eventTime                                metav1.MicroTime
	count                                    int32
	series                                   *corev1.EventSeries
}

func (e eventCells) row() []any {
	first := Age(e.first)
	if e.first.IsZero() {
		first = microAge(e.eventTime)
	}
	last := Age(e.last)
	if e.last.IsZero() {
		last = first
	}
	count := e.count
	if e.series != nil {
		last = microAge(e.series.LastObservedTime)
		count = e.series.Count
	} else if count == 0 {
		count = 1
	}
	target := strings.ToLower(e.object.Kind)
	if e.object.Name != "" {
		target += "/" + e.object.Name
	}
	return []any{last, e.eventType, e.reason, target, e.object.FieldPath, e.source, strings.TrimSpace(e.message), first, int64(count), e.name}
}

func eventSource(component, host, controller, instance string) string {
	if component == "" {
		component = controller
	}
	if host == "" {
		host = instance
	}
	if host == "" {
		return component
	}
	return component + ", " + host
}

// NewEventTableConvertor prints core/v1 events as LAST SEEN TYPE REASON
// OBJECT MESSAGE, wide SUBOBJECT SOURCE FIRST SEEN COUNT NAME.
func NewEventTableConvertor() *Convertor[*corev1.Event] {
	return New(eventColumns, func(ev *corev1.Event) []any {
		return eventCells{
			name: ev.Name, eventType: ev.Type, reason: ev.Reason, message: ev.Message,
			source: eventSource(ev.Source.Component, ev.Source.Host, ev.ReportingController, ev.ReportingInstance),
			object: ev.InvolvedObject, first: ev.FirstTimestamp, last: ev.LastTimestamp,
			eventTime: ev.EventTime, count: ev.Count, series: ev.Series,
		}.row()
	})
}

// NewEventsV1TableConvertor prints events.k8s.io/v1 events with the same
// columns as core events (regarding is the object, note the message).
func NewEventsV1TableConvertor() *Convertor[*eventsv1.Event] {
	return New(eventColumns, func(ev *eventsv1.Event) []any {
		c := eventCells{
			name: ev.Name, eventType: ev.Type, reason: ev.Reason, message: ev.Note,
			source: eventSource(ev.DeprecatedSource.Component, ev.DeprecatedSource.Host, ev.ReportingController, ev.ReportingInstance),
			object: ev.Regarding, first: ev.DeprecatedFirstTimestamp, last: ev.DeprecatedLastTimestamp,
			eventTime: ev.EventTime, count: ev.DeprecatedCount,
		}
		if ev.Series != nil {
			c.series = &corev1.EventSeries{Count: ev.Series.Count, LastObservedTime: ev.Series.LastObservedTime}
		}
		return c.row()
	})
}

// NewEndpointsTableConvertor prints endpoints as NAME ENDPOINTS AGE.
func NewEndpointsTableConvertor() *Convertor[*corev1.Endpoints] {
	return New([]metav1.TableColumnDefinition{
		nameColumn(), col("Endpoints", "string", corev1.Endpoints{}.SwaggerDoc()["subsets"]), ageColumn(),
	}, func(ep *corev1.Endpoints) []any {
		return []any{ep.Name, formatEndpoints(ep), Age(ep.CreationTimestamp)}
	})
}

func formatEndpoints(ep *corev1.Endpoints) string {
	if len(ep.Subsets) == 0 {
		return "<none>"
	}
	var list []string
	count := 0
	for _, ss := range ep.Subsets {
		if len(ss.Ports) == 0 {
			for _, a := range ss.Addresses {
				count++
				if len(list) < maxListed {
					list = append(list, a.IP)
				}
			}
			continue
		}
		for _, port := range ss.Ports {
			for _, a := range ss.Addresses {
				count++
				if len(list) < maxListed {
					list = append(list, net.JoinHostPort(a.IP, strconv.Itoa(int(port.Port))))
				}
			}
		}
	}
	s := strings.Join(list, ",")
	if count > maxListed {
		s = fmt.Sprintf("%s + %d more...", s, count-maxListed)
	}
	return s
}

// NewEndpointSliceTableConvertor prints endpoint slices as NAME ADDRESSTYPE
// PORTS ENDPOINTS AGE.
func NewEndpointSliceTableConvertor() *Convertor[*discoveryv1.EndpointSlice] {
	doc := discoveryv1.EndpointSlice{}.SwaggerDoc()
	return New([]metav1.TableColumnDefinition{
		nameColumn(),
		col("AddressType", "string", doc["addressType"]),
		col("Ports", "string", doc["ports"]),
		col("Endpoints", "string", doc["endpoints"]),
		ageColumn(),
	}, func(es *discoveryv1.EndpointSlice) []any {
		var ports, addrs []string
		for _, p := range es.Ports {
			switch {
			case p.Port != nil:
				ports = append(ports, strconv.Itoa(int(*p.Port)))
			case p.Name != nil:
				ports = append(ports, *p.Name)
			default:
				ports = append(ports, "*")
			}
		}
		for _, ep := range es.Endpoints {
			addrs = append(addrs, ep.Addresses...)
		}
		return []any{es.Name, string(es.AddressType), listWithMore(ports), listWithMore(addrs), Age(es.CreationTimestamp)}
	})
}

// listWithMore joins up to three items and counts the rest, or says <unset>.
func listWithMore(items []string) string {
	switch {
	case len(items) == 0:
		return "<unset>"
	case len(items) > maxListed:
		return fmt.Sprintf("%s + %d more...", strings.Join(items[:maxListed], ","), len(items)-maxListed)
	}
	return strings.Join(items, ",")
}

// NewJobTableConvertor prints jobs as NAME STATUS COMPLETIONS DURATION AGE,
// wide CONTAINERS IMAGES SELECTOR.
func NewJobTableConvertor() *Convertor[*batchv1.Job] {
	return New([]metav1.TableColumnDefinition{
		nameColumn(),
		col("Status", "string", "Status of the job."),
		col("Completions", "string", batchv1.JobStatus{}.SwaggerDoc()["succeeded"]),
		col("Duration", "string", "Time required to complete the job."),
		ageColumn(),
		wideCol("Containers", "string", "Names of each container in the template."),
		wideCol("Images", "string", "Images referenced by each container in the template."),
		wideCol("Selector", "string", batchv1.JobSpec{}.SwaggerDoc()["selector"]),
	}, func(job *batchv1.Job) []any {
		names, images := containerCells(job.Spec.Template.Spec.Containers)
		return []any{job.Name, JobStatus(job), jobCompletions(job), jobDuration(job), Age(job.CreationTimestamp),
			names, images, metav1.FormatLabelSelector(job.Spec.Selector)}
	})
}

// JobStatus is the STATUS column of a job: Complete, Failed, Terminating,
// Suspended, FailureTarget or Running, checked in that order.
func JobStatus(job *batchv1.Job) string {
	has := func(t batchv1.JobConditionType) bool {
		for _, c := range job.Status.Conditions {
			if c.Type == t {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	}
	switch {
	case has(batchv1.JobComplete):
		return "Complete"
	case has(batchv1.JobFailed):
		return "Failed"
	case job.DeletionTimestamp != nil:
		return "Terminating"
	case has(batchv1.JobSuspended):
		return "Suspended"
	case has(batchv1.JobFailureTarget):
		return "FailureTarget"
	}
	return "Running"
}

func jobCompletions(job *batchv1.Job) string {
	if job.Spec.Completions != nil {
		return fmt.Sprintf("%d/%d", job.Status.Succeeded, *job.Spec.Completions)
	}
	if p := job.Spec.Parallelism; p != nil && *p > 1 {
		return fmt.Sprintf("%d/1 of %d", job.Status.Succeeded, *p)
	}
	return fmt.Sprintf("%d/1", job.Status.Succeeded)
}

func jobDuration(job *batchv1.Job) string {
	switch {
	case job.Status.StartTime == nil:
		return ""
	case job.Status.CompletionTime == nil:
		return duration.HumanDuration(now().Sub(job.Status.StartTime.Time))
	}
	return duration.HumanDuration(job.Status.CompletionTime.Sub(job.Status.StartTime.Time))
}

func containerCells(cs []corev1.Container) (names, images string) {
	n, i := make([]string, len(cs)), make([]string, len(cs))
	for k, c := range cs {
		n[k], i[k] = c.Name, c.Image
	}
	return strings.Join(n, ","), strings.Join(i, ",")
}

// NewLeaseTableConvertor prints leases as NAME HOLDER AGE.
func NewLeaseTableConvertor() *Convertor[*coordinationv1.Lease] {
	return New([]metav1.TableColumnDefinition{
		nameColumn(), col("Holder", "string", coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]), ageColumn(),
	}, func(l *coordinationv1.Lease) []any {
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		return []any{l.Name, holder, Age(l.CreationTimestamp)}
	})
}

// createdAtColumns are what a real server shows for kinds without a printer
// of their own (Roles and ClusterRoles).
var createdAtColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	{Name: "Created At", Type: "date", Description: objectMetaDoc["creationTimestamp"]},
}

func createdAt(t metav1.Time) string {
	return t.UTC().Format(time.RFC3339)
}

// NewRoleTableConvertor prints roles as NAME CREATED AT.
func NewRoleTableConvertor() *Convertor[*rbacv1.Role] {
	return New(createdAtColumns, func(r *rbacv1.Role) []any { return []any{r.Name, createdAt(r.CreationTimestamp)} })
}

// NewClusterRoleTableConvertor prints cluster roles as NAME CREATED AT.
func NewClusterRoleTableConvertor() *Convertor[*rbacv1.ClusterRole] {
	return New(createdAtColumns, func(r *rbacv1.ClusterRole) []any { return []any{r.Name, createdAt(r.CreationTimestamp)} })
}

func bindingColumns(kind string) []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		col("Role", "string", rbacv1.RoleBinding{}.SwaggerDoc()["roleRef"]),
		ageColumn(),
		wideCol("Users", "string", "Users in the "+kind),
		wideCol("Groups", "string", "Groups in the "+kind),
		wideCol("ServiceAccounts", "string", "ServiceAccounts in the "+kind),
	}
}

func bindingRow(name string, created metav1.Time, ref rbacv1.RoleRef, subjects []rbacv1.Subject) []any {
	var users, groups, sas []string
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			users = append(users, s.Name)
		case rbacv1.GroupKind:
			groups = append(groups, s.Name)
		case rbacv1.ServiceAccountKind:
			sas = append(sas, s.Namespace+"/"+s.Name)
		}
	}
	return []any{name, ref.Kind + "/" + ref.Name, Age(created), strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(sas, ", ")}
}

// NewRoleBindingTableConvertor prints role bindings as NAME ROLE AGE, wide
// USERS GROUPS SERVICEACCOUNTS.
func NewRoleBindingTableConvertor() *Convertor[*rbacv1.RoleBinding] {
	return New(bindingColumns("roleBinding"), func(rb *rbacv1.RoleBinding) []any {
		return bindingRow(rb.Name, rb.CreationTimestamp, rb.RoleRef, rb.Subjects)
	})
}

// NewClusterRoleBindingTableConvertor prints cluster role bindings as NAME
// ROLE AGE, wide USERS GROUPS SERVICEACCOUNTS.
func NewClusterRoleBindingTableConvertor() *Convertor[*rbacv1.ClusterRoleBinding] {
	return New(bindingColumns("clusterRoleBinding"), func(rb *rbacv1.ClusterRoleBinding) []any {
		return bindingRow(rb.Name, rb.CreationTimestamp, rb.RoleRef, rb.Subjects)
	})
}
