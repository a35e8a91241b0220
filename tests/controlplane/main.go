// fabrik-controlplane: a test-only Kubernetes control plane in one binary.
//
//	fabrik-controlplane up --dir D [--port A] [--kcm-controllers LIST]
//	    embedded etcd + in-process kube-apiserver, kube-controller-manager and
//	    kube-scheduler as child processes of this binary. Prints
//	    "READY D/kubeconfig" on stdout once usable, then blocks until
//	    SIGTERM/SIGINT or (when stdin is a pipe/socket) stdin EOF.
//	fabrik-controlplane kcm ARGS...        upstream kube-controller-manager
//	fabrik-controlplane scheduler ARGS...  upstream kube-scheduler
//
// Not for production: tokens are in a plain CSV file, etcd does not fsync.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	_ "time/tzdata" // CronJob time zones

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/embed"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/klog/v2"
	apiapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
	apioptions "k8s.io/kubernetes/cmd/kube-apiserver/app/options"
	kcmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	schedapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

const (
	readyzTimeout  = 90 * time.Second
	bootstrapLimit = 60 * time.Second
	tenantUser     = "tenant-a"
	tenantGroup    = "tenants"
	tenantNS       = "tenant-a"
	viewerRole     = "fabrik-test-viewer"

	// draFeatureGates turns on the Kubernetes 1.34 DRA alpha features fabrik models. The
	// same value goes to kube-apiserver, kube-controller-manager and kube-scheduler: the
	// apiserver alone would keep the fields, but only the scheduler allocates with them and
	// only KCM runs the device-taint eviction controller. Without the gate the apiserver
	// silently drops the fields (ResourceSlice sharedCounters/consumesCounters, taints,
	// allowMultipleAllocations, capacity.requestPolicy; claim capacity requests).
	// DRADeviceBindingConditions is deliberately left off.
	draFeatureGates = "DRADeviceTaints=true,DRAPartitionableDevices=true,DRAConsumableCapacity=true"
	// draRuntimeConfig serves resource.k8s.io/v1alpha3 (DeviceTaintRule), which is off by
	// default as every alpha API version is.
	draRuntimeConfig = "resource.k8s.io/v1alpha3=true"
)

func usage() {
	fmt.Fprintf(os.Stderr, `usage:
  %[1]s up --dir DIR [--port PORT] [--kcm-controllers LIST]
  %[1]s kcm [kube-controller-manager flags]
  %[1]s scheduler [kube-scheduler flags]
`, filepath.Base(os.Args[0]))
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "up":
		if err := up(os.Args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "fabrik-controlplane up: %v\n", err)
			klog.Flush()
			os.Exit(1)
		}
		klog.Flush()
		os.Exit(0)
	case "kcm", "kube-controller-manager":
		cmd := kcmapp.NewControllerManagerCommand()
		cmd.SetArgs(nonNil(os.Args[2:]))
		os.Exit(cli.Run(cmd))
	case "scheduler", "kube-scheduler":
		cmd := schedapp.NewSchedulerCommand()
		cmd.SetArgs(nonNil(os.Args[2:]))
		os.Exit(cli.Run(cmd))
	default:
		usage()
	}
}

func nonNil(a []string) []string {
	if a == nil {
		return []string{}
	}
	return a
}

func logf(format string, args ...any) {
	klog.InfoDepth(1, "fabrik-controlplane: "+fmt.Sprintf(format, args...))
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randToken() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func writeSAKey(path string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}

type identity struct {
	user, token string
	groups      []string
}

func writeKubeconfig(path, server string, ca []byte, users map[string]identity, contexts []string, namespaces map[string]string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["fabrik-test"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	for _, ctxName := range contexts {
		id := users[ctxName]
		cfg.AuthInfos[id.user] = &clientcmdapi.AuthInfo{Token: id.token}
		cfg.Contexts[ctxName] = &clientcmdapi.Context{Cluster: "fabrik-test", AuthInfo: id.user, Namespace: namespaces[ctxName]}
	}
	cfg.CurrentContext = contexts[0]
	return clientcmd.WriteToFile(*cfg, path)
}

// gatesSuffix is ",GATES" for a non-empty list of further feature gates.
func gatesSuffix(gates string) string {
	if gates == "" {
		return ""
	}
	return "," + gates
}

func up(args []string) error {
	fs := pflag.NewFlagSet("up", pflag.ContinueOnError)
	dir := fs.String("dir", "", "state directory (created); kubeconfig, logs, etcd data and certs go here")
	port := fs.Int("port", 0, "kube-apiserver secure port on 127.0.0.1 (0: pick a free one)")
	kcmControllers := fs.String("kcm-controllers", "*", "value of kube-controller-manager --controllers")
	moreGates := fs.String("apiserver-feature-gates", "", "more kube-apiserver feature gates, after the DRA ones (WatchList=false: a server that refuses watch-lists, as 1.33 does by default)")
	keep := fs.Bool("keep", false, "restart on the state a previous `up --dir` left (etcd data, certs, tokens): a restarted API server, as clients see one")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("--dir is required")
	}
	d, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}

	// klog (used by the in-process apiserver) -> D/apiserver.log; stdout stays clean.
	apiLog, err := os.OpenFile(filepath.Join(d, "apiserver.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer apiLog.Close()
	kfs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(kfs)
	_ = kfs.Set("logtostderr", "false")
	_ = kfs.Set("one_output", "true") // each line once, not once per severity
	klog.SetOutput(apiLog)

	// Stop on SIGTERM/SIGINT, or on stdin EOF when stdin is a pipe or socket
	// (a parent test process holding the write end dies -> we shut down).
	stopCtx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if st, err := os.Stdin.Stat(); err == nil && st.Mode()&(os.ModeNamedPipe|os.ModeSocket) != 0 {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			logf("stdin reached EOF, shutting down")
			stop()
		}()
	}

	// ---- etcd ----
	etcdClientPort, err := freePort()
	if err != nil {
		return err
	}
	etcdPeerPort, err := freePort()
	if err != nil {
		return err
	}
	apiPort := *port
	if apiPort == 0 {
		if apiPort, err = freePort(); err != nil {
			return err
		}
	}
	ec := embed.NewConfig()
	ec.Name = "fabrik"
	ec.Dir = filepath.Join(d, "etcd")
	if !*keep {
		_ = os.RemoveAll(ec.Dir) // fresh cluster on every start
	}
	ec.UnsafeNoFsync = true
	ec.Logger = "zap"
	ec.LogLevel = "warn"
	ec.LogOutputs = []string{filepath.Join(d, "etcd.log")}
	// NewConfig leaves this at 0 (only the CLI flag has the 300ms default), which
	// logs a "request stats" warning for every single request.
	ec.WarningUnaryRequestDuration = time.Second
	cu := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(etcdClientPort)}
	pu := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(etcdPeerPort)}
	ec.ListenClientUrls = []url.URL{cu}
	ec.AdvertiseClientUrls = []url.URL{cu}
	ec.ListenPeerUrls = []url.URL{pu}
	ec.AdvertisePeerUrls = []url.URL{pu}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.ListenMetricsUrls = nil
	etcd, err := embed.StartEtcd(ec)
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	closeEtcd := sync.OnceFunc(etcd.Close) // Close panics when called twice
	defer closeEtcd()
	select {
	case <-etcd.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		return errors.New("etcd not ready after 30s")
	case err := <-etcd.Err():
		return fmt.Errorf("etcd: %w", err)
	}
	logf("etcd ready at %s", cu.String())

	// The API server reaches etcd through a gate on loopback that a test can close:
	// SIGUSR1 pauses etcd as the API server sees it (bytes stop both ways, new connections
	// wait), SIGUSR2 resumes it. etcd itself keeps running; nothing is lost.
	gatePort, err := freePort()
	if err != nil {
		return err
	}
	gate, err := newEtcdGate("127.0.0.1:"+strconv.Itoa(gatePort), cu.Host)
	if err != nil {
		return err
	}
	defer gate.close()
	gateSignals := make(chan os.Signal, 4)
	signal.Notify(gateSignals, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		for sig := range gateSignals {
			gate.set(sig == syscall.SIGUSR1)
		}
	}()
	gu := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(gatePort)}

	// ---- credentials ----
	saKey := filepath.Join(d, "sa.key")
	old := map[string]string{} // uid-<id> -> token, from the previous start (--keep)
	if *keep {
		if b, err := os.ReadFile(filepath.Join(d, "tokens.csv")); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				f := strings.SplitN(line, ",", 4)
				if len(f) >= 3 {
					old[f[2]] = f[0]
				}
			}
		}
	}
	if _, err := os.Stat(saKey); !*keep || err != nil {
		if err := writeSAKey(saKey); err != nil {
			return err
		}
	}
	tok := func(id string) string {
		if t, ok := old["uid-"+id]; ok {
			return t
		}
		return randToken()
	}
	ids := map[string]identity{
		"admin":     {user: "admin", token: tok("admin"), groups: []string{"system:masters"}},
		"tenant":    {user: tenantUser, token: tok("tenant"), groups: []string{tenantGroup}},
		"kcm":       {user: "system:kube-controller-manager", token: tok("kcm"), groups: []string{"system:masters"}},
		"scheduler": {user: "system:kube-scheduler", token: tok("scheduler"), groups: []string{"system:masters"}},
	}
	var csv []byte
	for _, k := range []string{"admin", "tenant", "kcm", "scheduler"} {
		id := ids[k]
		g := ""
		for i, x := range id.groups {
			if i > 0 {
				g += ","
			}
			g += x
		}
		csv = fmt.Appendf(csv, "%s,%s,%s,\"%s\"\n", id.token, id.user, "uid-"+k, g)
	}
	tokensFile := filepath.Join(d, "tokens.csv")
	if err := os.WriteFile(tokensFile, csv, 0o600); err != nil {
		return err
	}

	// ---- kube-apiserver (in-process) ----
	certDir := filepath.Join(d, "certs")
	if !*keep {
		_ = os.RemoveAll(certDir) // new serving cert every start
	}
	s := apioptions.NewServerRunOptions()
	afs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, f := range s.Flags().FlagSets {
		afs.AddFlagSet(f)
	}
	apiArgs := []string{
		"--etcd-servers=" + gu.String(),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + certDir,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + saKey,
		"--service-account-signing-key-file=" + saKey,
		"--token-auth-file=" + tokensFile,
		"--authorization-mode=Node,RBAC",
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		// Logs, exec and port-forward go from here to the node's kubelet. `fabrik sim` serves
		// every simulated kubelet on one local port and says so as the node's InternalDNS
		// address (`localhost`); its InternalIP is the simulated one, which nothing listens
		// on. kubeadm's order (InternalIP first) would dial that; DNS first finds the sim.
		"--kubelet-preferred-address-types=InternalDNS,InternalIP,ExternalDNS,ExternalIP,Hostname",
		"--feature-gates=" + draFeatureGates + gatesSuffix(*moreGates),
		"--runtime-config=" + draRuntimeConfig,
	}
	if err := afs.Parse(apiArgs); err != nil {
		return fmt.Errorf("apiserver flags: %w", err)
	}
	if err := s.GenericServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
		return fmt.Errorf("apiserver feature gates: %w", err)
	}
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	apiCtx, apiCancel := context.WithCancel(context.Background())
	defer apiCancel()
	completed, err := s.Complete(apiCtx)
	if err != nil {
		return fmt.Errorf("apiserver options: %w", err)
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return fmt.Errorf("apiserver options: %v", errs)
	}
	apiDone := make(chan error, 1)
	go func() { apiDone <- apiapp.Run(apiCtx, completed) }()
	server := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	logf("kube-apiserver starting at %s", server)

	// ---- wait for /readyz ----
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	deadline := time.Now().Add(readyzTimeout)
	for {
		if err := stopCtx.Err(); err != nil {
			return errors.New("interrupted while waiting for /readyz")
		}
		select {
		case err := <-apiDone:
			return fmt.Errorf("kube-apiserver exited early: %v", err)
		default:
		}
		req, _ := http.NewRequest("GET", server+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+ids["admin"].token)
		if resp, err := hc.Do(req); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && string(body) == "ok" {
				break
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver not ready after %s (see %s/apiserver.log)", readyzTimeout, d)
		}
		time.Sleep(250 * time.Millisecond)
	}
	logf("kube-apiserver ready")
	ca, err := os.ReadFile(filepath.Join(certDir, "apiserver.crt"))
	if err != nil {
		return err
	}

	// ---- kubeconfigs ----
	kcmKC := filepath.Join(d, "kcm.kubeconfig")
	schedKC := filepath.Join(d, "scheduler.kubeconfig")
	if err := writeKubeconfig(kcmKC, server, ca, ids, []string{"kcm"}, nil); err != nil {
		return err
	}
	if err := writeKubeconfig(schedKC, server, ca, ids, []string{"scheduler"}, nil); err != nil {
		return err
	}

	// ---- KCM + scheduler as children ----
	self, err := os.Executable()
	if err != nil {
		return err
	}
	kids := newChildren()
	defer kids.stopAll(10 * time.Second)
	if err := kids.start(self, filepath.Join(d, "kcm.log"), "kcm",
		"--kubeconfig="+kcmKC,
		"--authentication-kubeconfig="+kcmKC,
		"--authorization-kubeconfig="+kcmKC,
		"--leader-elect=false",
		"--secure-port=0",
		"--controllers="+*kcmControllers,
		"--use-service-account-credentials=false",
		"--service-account-private-key-file="+saKey,
		"--root-ca-file="+filepath.Join(certDir, "apiserver.crt"),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--feature-gates="+draFeatureGates,
	); err != nil {
		return err
	}
	if err := kids.start(self, filepath.Join(d, "scheduler.log"), "scheduler",
		"--kubeconfig="+schedKC,
		"--authentication-kubeconfig="+schedKC,
		"--authorization-kubeconfig="+schedKC,
		"--leader-elect=false",
		"--secure-port=0",
		"--feature-gates="+draFeatureGates,
	); err != nil {
		return err
	}

	// ---- bootstrap objects ----
	cfg := &rest.Config{Host: server, BearerToken: ids["admin"].token, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	bctx, bcancel := context.WithTimeout(stopCtx, bootstrapLimit)
	defer bcancel()
	if err := bootstrap(bctx, cs, kids); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}

	kubeconfig := filepath.Join(d, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, server, ca, ids, []string{"admin", "tenant"}, map[string]string{"tenant": tenantNS}); err != nil {
		return err
	}
	logf("READY %s", kubeconfig)
	fmt.Printf("READY %s\n", kubeconfig)
	_ = os.Stdout.Sync()

	// ---- run until told to stop ----
	select {
	case <-stopCtx.Done():
		logf("stop requested")
	case err := <-apiDone:
		kids.stopAll(10 * time.Second)
		return fmt.Errorf("kube-apiserver exited: %v", err)
	case name := <-kids.exited:
		kids.stopAll(10 * time.Second)
		return fmt.Errorf("child %s exited unexpectedly (see %s/%s.log)", name, d, name)
	}

	// ---- shutdown: children, apiserver, etcd ----
	kids.stopAll(10 * time.Second)
	apiCancel()
	select {
	case <-apiDone:
	case <-time.After(20 * time.Second):
		logf("kube-apiserver did not stop within 20s")
	}
	closeEtcd()
	logf("stopped")
	return nil
}

func waitFor(ctx context.Context, what string, f func() (bool, error)) error {
	var last error
	for {
		ok, err := f()
		if ok {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %v (last error: %v)", what, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func bootstrap(ctx context.Context, cs kubernetes.Interface, kids *children) error {
	for _, ns := range []string{"default", "kube-system"} {
		if err := waitFor(ctx, "namespace "+ns, func() (bool, error) {
			_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return err == nil, err
		}); err != nil {
			return err
		}
	}
	create := func(what string, f func() error) error {
		return waitFor(ctx, what, func() (bool, error) {
			err := f()
			if err == nil || apierrors.IsAlreadyExists(err) {
				return true, nil
			}
			return false, err
		})
	}
	if err := create("namespace "+tenantNS, func() error {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNS}}, metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	if err := create("clusterrole "+viewerRole, func() error {
		_, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: viewerRole},
			Rules: []rbacv1.PolicyRule{{
				APIGroups: []string{"*"},
				Resources: []string{"*"},
				Verbs:     []string{"get", "list", "watch"},
			}},
		}, metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	if err := create("clusterrolebinding "+viewerRole, func() error {
		_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: viewerRole + "-" + tenantUser},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: viewerRole},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: tenantUser}},
		}, metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	// Pods can only be created once the ServiceAccount admission plugin finds the
	// "default" ServiceAccount, which KCM creates. Wait so READY means "usable".
	for _, ns := range []string{"default", tenantNS} {
		if err := waitFor(ctx, "serviceaccount "+ns+"/default (created by kube-controller-manager)", func() (bool, error) {
			select {
			case name := <-kids.exited:
				kids.exited <- name
				return false, fmt.Errorf("child %s exited", name)
			default:
			}
			_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, err
		}); err != nil {
			return err
		}
	}
	return nil
}

// children runs the KCM and scheduler. All of them are started from one goroutine
// locked to its OS thread: Pdeathsig fires when the creating *thread* exits, so
// that thread must live as long as the parent.
type children struct {
	mu      sync.Mutex
	procs   map[string]*exec.Cmd
	done    map[string]chan struct{}
	req     chan childReq
	exited  chan string
	stopped bool
}

type childReq struct {
	cmd  *exec.Cmd
	resp chan error
}

func newChildren() *children {
	c := &children{procs: map[string]*exec.Cmd{}, done: map[string]chan struct{}{}, req: make(chan childReq), exited: make(chan string, 4)}
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives until the process exits
		for r := range c.req {
			r.resp <- r.cmd.Start()
		}
		select {} // keep the thread
	}()
	return c
}

func (c *children) start(self, logPath, name string, args ...string) error {
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(self, append([]string{name}, args...)...)
	cmd.Stdin = nil
	cmd.Stdout = lf
	cmd.Stderr = lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	resp := make(chan error, 1)
	c.req <- childReq{cmd: cmd, resp: resp}
	if err := <-resp; err != nil {
		lf.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	logf("started %s pid %d", name, cmd.Process.Pid)
	done := make(chan struct{})
	c.mu.Lock()
	c.procs[name] = cmd
	c.done[name] = done
	c.mu.Unlock()
	go func() {
		err := cmd.Wait()
		lf.Close()
		close(done)
		c.mu.Lock()
		stopped := c.stopped
		c.mu.Unlock()
		logf("%s exited: %v", name, err)
		if !stopped {
			select {
			case c.exited <- name:
			default:
			}
		}
	}()
	return nil
}

func (c *children) stopAll(grace time.Duration) {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.stopped = true
	procs := c.procs
	c.mu.Unlock()
	for _, cmd := range procs {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	expired := false
	for name, cmd := range procs {
		if !expired {
			select {
			case <-c.done[name]:
				continue
			case <-timer.C:
				expired = true
			}
		}
		_ = cmd.Process.Kill()
		<-c.done[name]
	}
}

// etcdGate forwards TCP connections to etcd, and holds every byte (and every new
// connection) while paused: to the API server, etcd hangs, as a stalled disk or a
// partition makes it.
type etcdGate struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cond   *sync.Cond
	paused bool
}

func newEtcdGate(listen, target string) (*etcdGate, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("etcd gate: %w", err)
	}
	g := &etcdGate{ln: ln, target: target}
	g.cond = sync.NewCond(&g.mu)
	go g.serve()
	return g, nil
}

func (g *etcdGate) set(paused bool) {
	g.mu.Lock()
	g.paused = paused
	g.mu.Unlock()
	g.cond.Broadcast()
	if paused {
		logf("etcd gate: paused (SIGUSR1)")
	} else {
		logf("etcd gate: resumed (SIGUSR2)")
	}
}

func (g *etcdGate) wait() {
	g.mu.Lock()
	for g.paused {
		g.cond.Wait()
	}
	g.mu.Unlock()
}

func (g *etcdGate) close() { _ = g.ln.Close() }

func (g *etcdGate) serve() {
	for {
		c, err := g.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			g.wait()
			up, err := net.Dial("tcp", g.target)
			if err != nil {
				_ = c.Close()
				return
			}
			go g.pipe(up, c)
			g.pipe(c, up)
		}()
	}
}

// pipe copies src to dst, each chunk only while the gate is open.
func (g *etcdGate) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 64*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			g.wait()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
