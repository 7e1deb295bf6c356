package manifests

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// kustomizationDir is deploy/kubernetes, seen from this package.
const kustomizationDir = "../kubernetes"

// rendered is the kustomization's output, one typed object of each kind it holds.
type rendered struct {
	deployment *appsv1.Deployment
	job        *batchv1.Job
	service    *corev1.Service
	pdb        *policyv1.PodDisruptionBudget
	hpa        *autoscalingv2.HorizontalPodAutoscaler
	configMap  *corev1.ConfigMap
	account    *corev1.ServiceAccount
}

// decodeStrict decodes one YAML document into obj the way the API server's strict
// field validation does: unknown fields, duplicate fields and fields spelled in
// another case are errors.
func decodeStrict(doc []byte, obj any) error {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(js, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	if len(strict) > 0 {
		return fmt.Errorf("strict decoding: %v", strict)
	}
	return nil
}

// render builds the kustomization with kustomize's own library (no plugins, no remote
// bases, nothing fetched) and decodes every object strictly into its API type.
func render(t *testing.T) rendered {
	t.Helper()
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), kustomizationDir)
	require.NoError(t, err)
	// Each kind the kustomization may render, exactly once, into its API type.
	targets := map[string]any{
		"apps/v1 Deployment":                     &appsv1.Deployment{},
		"batch/v1 Job":                           &batchv1.Job{},
		"v1 Service":                             &corev1.Service{},
		"policy/v1 PodDisruptionBudget":          &policyv1.PodDisruptionBudget{},
		"autoscaling/v2 HorizontalPodAutoscaler": &autoscalingv2.HorizontalPodAutoscaler{},
		"v1 ConfigMap":                           &corev1.ConfigMap{},
		"v1 ServiceAccount":                      &corev1.ServiceAccount{},
	}
	seen := map[string]bool{}
	for _, res := range resources.Resources() {
		doc, err := res.AsYAML()
		require.NoError(t, err)
		gvk := res.GetGvk()
		key := gvk.ApiVersion() + " " + gvk.Kind
		obj, known := targets[key]
		require.True(t, known, "the kustomization renders %s %q, which these tests do not check", key, res.GetName())
		require.False(t, seen[key], "%s rendered twice", key)
		seen[key] = true
		require.NoError(t, decodeStrict(doc, obj), "%s %s:\n%s", key, res.GetName(), doc)
	}
	for key := range targets {
		require.True(t, seen[key], "the kustomization renders no %s", key)
	}
	return rendered{
		deployment: targets["apps/v1 Deployment"].(*appsv1.Deployment),
		job:        targets["batch/v1 Job"].(*batchv1.Job),
		service:    targets["v1 Service"].(*corev1.Service),
		pdb:        targets["policy/v1 PodDisruptionBudget"].(*policyv1.PodDisruptionBudget),
		hpa:        targets["autoscaling/v2 HorizontalPodAutoscaler"].(*autoscalingv2.HorizontalPodAutoscaler),
		configMap:  targets["v1 ConfigMap"].(*corev1.ConfigMap),
		account:    targets["v1 ServiceAccount"].(*corev1.ServiceAccount),
	}
}

// TestStrictDecodingRefuses proves the decoder the other tests rely on can fail: a
// misspelled, a wrongly cased and a duplicated field are refused.
func TestStrictDecodingRefuses(t *testing.T) {
	t.Parallel()
	for name, doc := range map[string]string{
		"unknown field":   "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {selectr: {a: b}}\n",
		"wrong case":      "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {Selector: {a: b}}\n",
		"duplicate field": "{\"apiVersion\": \"v1\", \"kind\": \"Service\", \"kind\": \"Service\"}\n",
	} {
		require.Error(t, decodeStrict([]byte(doc), &corev1.Service{}), name)
	}
	require.NoError(t, decodeStrict([]byte("apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {selector: {a: b}}\n"), &corev1.Service{}))
}

// container returns the pod spec's only container.
func container(t *testing.T, spec corev1.PodSpec) corev1.Container {
	t.Helper()
	require.Len(t, spec.Containers, 1)
	require.Empty(t, spec.InitContainers)
	return spec.Containers[0]
}

// portNumber resolves a probe's or Service's port (a name or a number) against the
// container's ports.
func portNumber(t *testing.T, c corev1.Container, port intstr.IntOrString) int32 {
	t.Helper()
	if port.Type == intstr.Int {
		return port.IntVal
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port named %q", c.Name, port.StrVal)
	return 0
}

// duration reads a Go duration setting from the ConfigMap.
func duration(t *testing.T, cm *corev1.ConfigMap, name string) time.Duration {
	t.Helper()
	v, ok := cm.Data[name]
	require.True(t, ok, "the ConfigMap sets no %s", name)
	d, err := time.ParseDuration(v)
	require.NoError(t, err, name)
	return d
}

func TestKubernetesProbesAndPorts(t *testing.T) {
	t.Parallel()
	r := render(t)
	spec := r.deployment.Spec.Template.Spec
	c := container(t, spec)
	require.Equal(t, []string{"serve"}, c.Args)
	require.Empty(t, c.Command, "the image's entrypoint is the binary")

	// The port the service binds (AGENT_CONTEXT_BIND) is the container port.
	bind := r.configMap.Data["AGENT_CONTEXT_BIND"]
	require.Equal(t, "0.0.0.0:5120", bind)
	require.Len(t, c.Ports, 1)
	require.Equal(t, int32(5120), c.Ports[0].ContainerPort)
	require.Equal(t, "http", c.Ports[0].Name)

	probe := func(p *corev1.Probe, what string) (string, int32) {
		require.NotNil(t, p, what)
		require.NotNil(t, p.HTTPGet, what)
		return p.HTTPGet.Path, portNumber(t, c, p.HTTPGet.Port)
	}
	livePath, livePort := probe(c.LivenessProbe, "liveness")
	require.Equal(t, "/health", livePath, "liveness must not depend on the database")
	require.Equal(t, int32(5120), livePort)
	readyPath, readyPort := probe(c.ReadinessProbe, "readiness")
	require.Equal(t, "/ready", readyPath)
	require.Equal(t, int32(5120), readyPort)
	startPath, startPort := probe(c.StartupProbe, "startup")
	require.Equal(t, "/health", startPath)
	require.Equal(t, int32(5120), startPort)

	// The Service reaches the same port on the Deployment's pods only.
	require.Len(t, r.service.Spec.Ports, 1)
	require.Equal(t, int32(5120), portNumber(t, c, r.service.Spec.Ports[0].TargetPort))
	podLabels := labels.Set(r.deployment.Spec.Template.Labels)
	require.True(t, labels.SelectorFromSet(r.service.Spec.Selector).Matches(podLabels))
	require.False(t, labels.SelectorFromSet(r.service.Spec.Selector).Matches(labels.Set(r.job.Spec.Template.Labels)),
		"the Service must not route to migration pods")
}

// TestKubernetesShutdownBudget: the preStop sleep, the drain delay and the drain
// timeout (twice: the listener, then running jobs) fit in the grace period, and the
// drain delay outlasts what the readiness probe needs to see the 503.
func TestKubernetesShutdownBudget(t *testing.T) {
	t.Parallel()
	r := render(t)
	spec := r.deployment.Spec.Template.Spec
	c := container(t, spec)
	require.NotNil(t, c.Lifecycle)
	require.NotNil(t, c.Lifecycle.PreStop)
	require.NotNil(t, c.Lifecycle.PreStop.Sleep, "the image has no shell: preStop uses the kubelet's sleep")
	preStop := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	delay := duration(t, r.configMap, "AGENT_CONTEXT_DRAIN_DELAY")
	timeout := duration(t, r.configMap, "AGENT_CONTEXT_DRAIN_TIMEOUT")
	require.NotNil(t, spec.TerminationGracePeriodSeconds)
	grace := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	require.Less(t, preStop+delay+2*timeout, grace, "SIGKILL would cut the drain short")

	rp := c.ReadinessProbe
	noticed := time.Duration(rp.PeriodSeconds*rp.FailureThreshold) * time.Second
	require.Greater(t, delay, noticed, "the listener would close before readiness fails")
}

// TestKubernetesSecretsAreReferences: every credential reaches the pods from a Secret
// (secretKeyRef or a Secret volume); none is written in the manifests, and the
// kustomization renders no Secret at all.
func TestKubernetesSecretsAreReferences(t *testing.T) {
	t.Parallel()
	r := render(t)
	sensitive := regexp.MustCompile(`(_TOKEN|_SECRET|_PASSWORD|_API_KEY|_HMAC_KEYS|_DATABASE_URL|_DATABASE_READ_URL)$`)
	mustBeSecret := []string{"AGENT_CONTEXT_DATABASE_URL", "AGENT_CONTEXT_A2A_HMAC_KEYS"}

	for key, value := range r.configMap.Data {
		require.False(t, sensitive.MatchString(key), "%s is a credential and must come from a Secret", key)
		require.NotContains(t, value, "://", "%s: a URL in the ConfigMap could carry a password", key)
	}
	for name, spec := range map[string]corev1.PodSpec{
		"Deployment": r.deployment.Spec.Template.Spec,
		"Job":        r.job.Spec.Template.Spec,
	} {
		c := container(t, spec)
		names := []string{}
		for _, env := range c.Env {
			names = append(names, env.Name)
			if !sensitive.MatchString(env.Name) {
				continue
			}
			require.Empty(t, env.Value, "%s %s is written inline", name, env.Name)
			require.NotNil(t, env.ValueFrom, "%s %s", name, env.Name)
			require.NotNil(t, env.ValueFrom.SecretKeyRef, "%s %s must be a secretKeyRef", name, env.Name)
			require.NotEmpty(t, env.ValueFrom.SecretKeyRef.Name)
			require.NotEmpty(t, env.ValueFrom.SecretKeyRef.Key)
		}
		require.Contains(t, names, "AGENT_CONTEXT_DATABASE_URL", name)
		if name == "Deployment" {
			for _, n := range mustBeSecret {
				require.Contains(t, names, n)
			}
		}
		for _, ef := range c.EnvFrom {
			require.Nil(t, ef.SecretRef, "%s: envFrom a whole Secret hides which keys are used", name)
		}
	}

	// The JWKS file the service reads is a mounted Secret.
	spec := r.deployment.Spec.Template.Spec
	c := container(t, spec)
	jwks := r.configMap.Data["AGENT_CONTEXT_JWKS_FILE"]
	require.NotEmpty(t, jwks)
	var mount *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if m.MountPath == path.Dir(jwks) {
			mount = &c.VolumeMounts[i]
		}
	}
	require.NotNil(t, mount, "nothing is mounted at %s", path.Dir(jwks))
	require.True(t, mount.ReadOnly)
	idx := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == mount.Name })
	require.GreaterOrEqual(t, idx, 0)
	secret := spec.Volumes[idx].Secret
	require.NotNil(t, secret, "the JWKS volume must be a Secret")
	require.Equal(t, []corev1.KeyToPath{{Key: "jwks.json", Path: path.Base(jwks)}}, secret.Items)

	// The configuration the pods read is the ConfigMap kustomize generated (its name
	// carries the content hash, so a change rolls the pods).
	require.Len(t, c.EnvFrom, 1)
	require.NotNil(t, c.EnvFrom[0].ConfigMapRef)
	require.Equal(t, r.configMap.Name, c.EnvFrom[0].ConfigMapRef.Name)
	require.True(t, strings.HasPrefix(r.configMap.Name, "agent-context-config-"), r.configMap.Name)
	require.Equal(t, "false", r.configMap.Data["AGENT_CONTEXT_AUTO_MIGRATE"], "the Job migrates, not every replica")
}

// TestKubernetesMigrationJob: one run of `agent-context migrate up` with the
// Deployment's image and database.
func TestKubernetesMigrationJob(t *testing.T) {
	t.Parallel()
	r := render(t)
	spec := r.job.Spec.Template.Spec
	c := container(t, spec)
	require.Empty(t, c.Command, "the image's entrypoint is the binary")
	require.Equal(t, []string{"migrate", "up"}, c.Args)
	require.Equal(t, container(t, r.deployment.Spec.Template.Spec).Image, c.Image)
	require.Equal(t, corev1.RestartPolicyNever, spec.RestartPolicy)
	require.NotNil(t, r.job.Spec.BackoffLimit)
	require.NotNil(t, r.job.Spec.ActiveDeadlineSeconds, "a migration that hangs must end")

	dsn := func(c corev1.Container) corev1.SecretKeySelector {
		for _, env := range c.Env {
			if env.Name == "AGENT_CONTEXT_DATABASE_URL" {
				return *env.ValueFrom.SecretKeyRef
			}
		}
		t.Fatalf("%s has no AGENT_CONTEXT_DATABASE_URL", c.Name)
		return corev1.SecretKeySelector{}
	}
	require.Equal(t, dsn(container(t, r.deployment.Spec.Template.Spec)), dsn(c), "the Job migrates the database the service uses")
}

// TestKubernetesScaling: the HPA scales the Deployment, which leaves the replica count
// to it; the PDB covers exactly the Deployment's pods and still lets a node drain.
func TestKubernetesScaling(t *testing.T) {
	t.Parallel()
	r := render(t)
	d := r.deployment
	require.Nil(t, d.Spec.Replicas, "the HPA owns the replica count; a fixed one would fight it on every apply")

	ref := r.hpa.Spec.ScaleTargetRef
	require.Equal(t, autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name}, ref)
	require.NotNil(t, r.hpa.Spec.MinReplicas)
	require.GreaterOrEqual(t, *r.hpa.Spec.MinReplicas, int32(2), "one replica cannot survive its own restart")
	require.Greater(t, r.hpa.Spec.MaxReplicas, *r.hpa.Spec.MinReplicas)
	require.NotEmpty(t, r.hpa.Spec.Metrics)

	deploySelector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	require.NoError(t, err)
	require.True(t, deploySelector.Matches(labels.Set(d.Spec.Template.Labels)))
	pdbSelector, err := metav1.LabelSelectorAsSelector(r.pdb.Spec.Selector)
	require.NoError(t, err)
	require.Equal(t, deploySelector.String(), pdbSelector.String(), "the PDB must cover the Deployment's pods")
	require.False(t, pdbSelector.Matches(labels.Set(r.job.Spec.Template.Labels)), "the PDB must not count migration pods")
	require.Nil(t, r.pdb.Spec.MinAvailable)
	require.NotNil(t, r.pdb.Spec.MaxUnavailable)
	require.Less(t, r.pdb.Spec.MaxUnavailable.IntValue(), int(*r.hpa.Spec.MinReplicas))
	require.Positive(t, r.pdb.Spec.MaxUnavailable.IntValue(), "a PDB that allows no eviction blocks every node drain")
}

// TestKubernetesPodHardening: non-root, read-only root filesystem, no privileges, no
// API token, requests and limits on every container, writable /tmp.
func TestKubernetesPodHardening(t *testing.T) {
	t.Parallel()
	r := render(t)
	require.NotNil(t, r.account.AutomountServiceAccountToken)
	require.False(t, *r.account.AutomountServiceAccountToken)
	for name, spec := range map[string]corev1.PodSpec{
		"Deployment": r.deployment.Spec.Template.Spec,
		"Job":        r.job.Spec.Template.Spec,
	} {
		require.Equal(t, r.account.Name, spec.ServiceAccountName, name)
		require.NotNil(t, spec.AutomountServiceAccountToken, name)
		require.False(t, *spec.AutomountServiceAccountToken, name)
		require.NotNil(t, spec.SecurityContext, name)
		require.NotNil(t, spec.SecurityContext.RunAsNonRoot, name)
		require.True(t, *spec.SecurityContext.RunAsNonRoot, name)
		require.NotNil(t, spec.SecurityContext.RunAsUser, name)
		require.NotZero(t, *spec.SecurityContext.RunAsUser, name)
		c := container(t, spec)
		sc := c.SecurityContext
		require.NotNil(t, sc, name)
		require.True(t, *sc.ReadOnlyRootFilesystem, name)
		require.False(t, *sc.AllowPrivilegeEscalation, name)
		require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, name)
		for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, ok := c.Resources.Requests[res]
			require.True(t, ok, "%s requests no %s", name, res)
			limit, ok := c.Resources.Limits[res]
			require.True(t, ok, "%s limits no %s", name, res)
			require.LessOrEqual(t, req.Cmp(limit), 0, "%s: %s request above its limit", name, res)
		}
	}
	c := container(t, r.deployment.Spec.Template.Spec)
	require.True(t, slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/tmp" }),
		"a read-only root filesystem needs a writable /tmp")
	idx := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "GOMEMLIMIT" })
	require.GreaterOrEqual(t, idx, 0)
	require.Equal(t, "limits.memory", c.Env[idx].ValueFrom.ResourceFieldRef.Resource)
}
