package pgcluster

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const (
	passwordFile = "agent-context-password"
	logFile      = "server.log"
	superuser    = "postgres"
	// startAttempts bounds retries when the free port we picked was taken by someone
	// else between choosing it and the server binding it.
	startAttempts = 3
)

// ErrNoBinaries reports that no Postgres server binaries could be found.
var ErrNoBinaries = errors.New("pgcluster: no Postgres server binaries (postgres, initdb, pg_ctl) " +
	"on PATH, in /usr/lib/postgresql/*/bin or at `pg_config --bindir`; " +
	"run deploy/local/setup.sh to install Postgres 15 and pgvector")

// Options configures Start.
type Options struct {
	// DataDir is the Postgres data directory, e.g. "<AGENT_CONTEXT_DATA_DIR>/pg"; it is
	// created by initdb on the first Start and reused afterwards.
	DataDir string
	// BinDir holds postgres, initdb and pg_ctl; empty means FindBinDir.
	BinDir string
	// Database is created on start when missing; default "agent_context".
	Database string
	// Settings are extra server settings passed as `-c name=value`. fsync=off also
	// makes initdb skip its fsyncs, since the caller has given up durability anyway.
	Settings map[string]string
	// Logger receives lifecycle messages; nil discards them.
	Logger *slog.Logger
}

// Cluster is a running private Postgres server.
type Cluster struct {
	bin      string
	dataDir  string
	database string
	settings map[string]string
	log      *slog.Logger
	cred     *syscall.Credential // nil: the server runs as this process's user
	password string
	port     int

	mu   sync.Mutex
	lock *os.File // flocked password file; nil once stopped
}

// FindBinDir returns the directory holding postgres, initdb and pg_ctl, looking on PATH,
// then in /usr/lib/postgresql/*/bin (highest version first), then at `pg_config --bindir`.
// It returns ErrNoBinaries when none has all three.
func FindBinDir() (string, error) {
	if p, err := exec.LookPath("postgres"); err == nil {
		// Debian links the binaries into PATH; initdb finds postgres next to its real path.
		if real, err := filepath.EvalSymlinks(p); err == nil && hasServerBinaries(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
		if hasServerBinaries(filepath.Dir(p)) {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(dir string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(dir)), 64)
		return v
	}
	slices.SortFunc(dirs, func(a, b string) int { return cmp.Compare(version(b), version(a)) })
	for _, dir := range dirs {
		if hasServerBinaries(dir) {
			return dir, nil
		}
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); hasServerBinaries(dir) {
			return dir, nil
		}
	}
	return "", ErrNoBinaries
}

func hasServerBinaries(dir string) bool {
	for _, name := range []string{"postgres", "initdb", "pg_ctl"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// Start initializes the cluster in opts.DataDir if needed, starts it on a free loopback
// port, waits until it accepts connections and creates opts.Database if missing.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.DataDir == "" {
		return nil, errors.New("pgcluster: Options.DataDir is required")
	}
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	c := &Cluster{bin: opts.BinDir, dataDir: dataDir, database: opts.Database, settings: opts.Settings, log: opts.Logger}
	if c.bin == "" {
		if c.bin, err = FindBinDir(); err != nil {
			return nil, err
		}
	}
	if c.database == "" {
		c.database = "agent_context"
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.cred, err = serverCredential(dataDir); err != nil {
		return nil, err
	}
	if err := c.initIfNeeded(ctx); err != nil {
		return nil, err
	}
	if err := c.lockDataDir(); err != nil {
		return nil, err
	}
	if err := c.stopLeftover(ctx); err != nil {
		c.unlock()
		return nil, err
	}
	if err := c.startServer(ctx); err != nil {
		// A canceled pg_ctl may leave a postmaster starting behind it.
		_ = c.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := c.createDatabase(ctx); err != nil {
		// The server is up but unusable for the caller; don't leave it running.
		_ = c.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	c.log.Info("pgcluster: started", "data_dir", dataDir, "port", c.port, "database", c.database)
	return c, nil
}

// DSN returns the URL of opts.Database on the running server.
func (c *Cluster) DSN() string { return c.dsn(c.database) }

// AdminDSN returns the URL of the "postgres" maintenance database on the same server.
func (c *Cluster) AdminDSN() string { return c.dsn("postgres") }

func (c *Cluster) dsn(database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(superuser, c.password),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Stop shuts the server down with pg_ctl's fast mode (open transactions roll back,
// committed data is flushed) and releases the data directory. Stopping a stopped
// cluster is a no-op; after a failed Stop, Stop may be retried.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lock == nil {
		return nil
	}
	if err := c.run(ctx, "pg_ctl", "stop", "-D", c.dataDir, "-m", "fast", "-w"); err != nil {
		// The server may have died on its own; that still counts as stopped.
		if ctx.Err() != nil || c.running(context.WithoutCancel(ctx)) {
			return fmt.Errorf("pgcluster: stop: %w", err)
		}
	}
	c.unlockLocked()
	c.log.Info("pgcluster: stopped", "data_dir", c.dataDir)
	return nil
}

func (c *Cluster) unlock() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unlockLocked()
}

func (c *Cluster) unlockLocked() {
	if c.lock != nil {
		_ = c.lock.Close() // closing the descriptor releases the flock; a read-only file has nothing to flush
		c.lock = nil
	}
}

// serverCredential says which user runs initdb and the server: nil (ourselves) unless
// we are root, which Postgres refuses. An existing cluster keeps its owner, so a data
// directory created by an ordinary user still starts when root runs the service later.
func serverCredential(dataDir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	if fi, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 {
			return &syscall.Credential{Uid: st.Uid, Gid: st.Gid}, nil
		}
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		// Empty Groups drops root's supplementary groups too.
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("pgcluster: running as root, Postgres needs an unprivileged user to run as; " +
		"neither \"postgres\" nor \"nobody\" exists")
}

// initIfNeeded creates the cluster on first start. initdb runs in a temporary sibling
// directory that is renamed into place only once complete, so a crash mid-initdb never
// leaves a half-made cluster, and two processes racing on first start converge on one.
func (c *Cluster) initIfNeeded(ctx context.Context) error {
	parent := filepath.Dir(c.dataDir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if err := c.ensureReachable(parent); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(c.dataDir, "PG_VERSION")); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if entries, err := os.ReadDir(c.dataDir); err == nil && len(entries) > 0 {
		return fmt.Errorf("pgcluster: %s is not empty and holds no Postgres cluster", c.dataDir)
	}

	staging, err := os.MkdirTemp(parent, ".pginit-*")
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	defer func() { _ = os.RemoveAll(staging) }()
	pw := make([]byte, 24)
	rand.Read(pw)
	password := hex.EncodeToString(pw)

	// initdb reads the password from a file it can open as the server user, and the data
	// directory must be empty, so this file sits beside it only while initdb runs.
	pwfile, err := c.writeOwnedFile(parent, ".pgpw-*", password)
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(pwfile) }()
	if err := c.chown(staging); err != nil {
		return err
	}
	args := []string{"-D", staging, "-U", superuser, "--auth=scram-sha-256", "--pwfile=" + pwfile, "--encoding=UTF8"}
	if goruntime.GOOS == "linux" {
		args = append(args, "--locale=C.UTF-8") // glibc and musl always have it: deterministic, Unicode-aware
	} else {
		args = append(args, "--no-locale")
	}
	if c.settings["fsync"] == "off" {
		args = append(args, "--no-sync")
	}
	c.log.Info("pgcluster: creating cluster", "data_dir", c.dataDir)
	if err := c.run(ctx, "initdb", args...); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if _, err := c.writeOwnedFile(staging, passwordFile, password); err != nil {
		return err
	}
	// rename(2) atomically replaces an empty DataDir; os.Rename refuses any directory.
	if err := syscall.Rename(staging, c.dataDir); err != nil {
		if _, statErr := os.Stat(filepath.Join(c.dataDir, "PG_VERSION")); statErr == nil {
			return nil // another process initialized it first; use theirs
		}
		return fmt.Errorf("pgcluster: move the new cluster into %s: %w", c.dataDir, err)
	}
	return nil
}

// writeOwnedFile writes content to a 0600 file owned by the server user. A pattern with
// '*' makes a unique temporary name; its path is returned.
func (c *Cluster) writeOwnedFile(dir, pattern, content string) (string, error) {
	var f *os.File
	var err error
	if strings.Contains(pattern, "*") {
		f, err = os.CreateTemp(dir, pattern)
	} else {
		f, err = os.OpenFile(filepath.Join(dir, pattern), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	}
	if err != nil {
		return "", fmt.Errorf("pgcluster: %w", err)
	}
	_, err = f.WriteString(content + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = c.chown(f.Name())
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("pgcluster: %w", err)
	}
	return f.Name(), nil
}

func (c *Cluster) chown(path string) error {
	if c.cred == nil {
		return nil
	}
	if err := os.Chown(path, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	return nil
}

// ensureReachable grants the server user search permission on every ancestor of dir it
// could not traverse (t.TempDir and /root are 0700), because Postgres must reach its
// data directory by path. Search without read lets it pass through, not list.
func (c *Cluster) ensureReachable(dir string) error {
	if c.cred == nil {
		return nil
	}
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		bit := fs.FileMode(0o001)
		switch {
		case st.Uid == c.cred.Uid:
			bit = 0o100
		case st.Gid == c.cred.Gid:
			bit = 0o010
		}
		if fi.Mode()&bit == 0 {
			if err := os.Chmod(p, fi.Mode()|bit); err != nil {
				return fmt.Errorf("pgcluster: let the server user reach its data: %w", err)
			}
			c.log.Info("pgcluster: granted the server user search permission on a directory above its data",
				"dir", p, "uid", c.cred.Uid)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// lockDataDir takes an exclusive flock on the password file for as long as the cluster
// runs and reads the password from it.
func (c *Cluster) lockDataDir() error {
	f, err := os.Open(filepath.Join(c.dataDir, passwordFile))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pgcluster: %s holds a cluster without %s; it was not made by pgcluster", c.dataDir, passwordFile)
	}
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("pgcluster: %s is in use by another process", c.dataDir)
		}
		return fmt.Errorf("pgcluster: lock %s: %w", c.dataDir, err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("pgcluster: %w", err)
	}
	c.password = strings.TrimSpace(string(b))
	c.lock = f
	return nil
}

// stopLeftover stops a postmaster still running on the data directory. Holding the lock
// proves no live Cluster owns it, so it outlived a crashed run; its port is unknown to
// us, so stopping and restarting is simpler than adopting it.
func (c *Cluster) stopLeftover(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(c.dataDir, "postmaster.pid")); err != nil || !c.running(ctx) {
		return nil // a stale pid file alone is handled by postgres itself
	}
	c.log.Warn("pgcluster: stopping a server left running by an earlier process", "data_dir", c.dataDir)
	if err := c.run(ctx, "pg_ctl", "stop", "-D", c.dataDir, "-m", "fast", "-w"); err != nil {
		return fmt.Errorf("pgcluster: stop leftover server: %w", err)
	}
	return nil
}

func (c *Cluster) running(ctx context.Context) bool {
	return c.run(ctx, "pg_ctl", "status", "-D", c.dataDir) == nil
}

func (c *Cluster) startServer(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return fmt.Errorf("pgcluster: pick a port: %w", err)
		}
		serverLog, err := c.pgStart(ctx, port)
		if err == nil {
			c.port = port
			return nil
		}
		if attempt < startAttempts && ctx.Err() == nil && strings.Contains(serverLog, "could not bind") {
			continue
		}
		return fmt.Errorf("pgcluster: start: %w\nserver log:\n%s", err, serverLog)
	}
}

// pgStart starts the server on port and waits until it accepts connections; on
// failure it returns what the server logged.
func (c *Cluster) pgStart(ctx context.Context, port int) (string, error) {
	logPath := filepath.Join(c.dataDir, logFile)
	var offset int64
	if fi, err := os.Stat(logPath); err == nil {
		offset = fi.Size()
	}
	if err := c.run(ctx, "pg_ctl", "start", "-w", "-D", c.dataDir, "-l", logPath, "-o", c.serverArgs(port)); err != nil {
		return readFrom(logPath, offset), err
	}
	return "", nil
}

// Restart stops the server as Stop does (open transactions roll back, every
// connection is closed) and starts it again on the same port, so DSNs stay valid and
// clients can reconnect. Tests use it to prove that they do.
func (c *Cluster) Restart(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lock == nil {
		return errors.New("pgcluster: restart: the cluster is stopped")
	}
	if err := c.run(ctx, "pg_ctl", "stop", "-D", c.dataDir, "-m", "fast", "-w"); err != nil {
		return fmt.Errorf("pgcluster: restart: stop: %w", err)
	}
	if serverLog, err := c.pgStart(ctx, c.port); err != nil {
		return fmt.Errorf("pgcluster: restart: start: %w\nserver log:\n%s", err, serverLog)
	}
	c.log.Info("pgcluster: restarted", "data_dir", c.dataDir, "port", c.port)
	return nil
}

// serverArgs renders the server settings for pg_ctl -o, which passes them through
// /bin/sh, hence the quoting. Ours come last so callers cannot move the listener.
func (c *Cluster) serverArgs(port int) string {
	var args []string
	for _, k := range slices.Sorted(maps.Keys(c.settings)) {
		args = append(args, "-c", shellQuote(k+"="+c.settings[k]))
	}
	args = append(args,
		"-c", shellQuote("listen_addresses=127.0.0.1"),
		"-c", shellQuote("port="+strconv.Itoa(port)),
		"-c", shellQuote("unix_socket_directories="))
	return strings.Join(args, " ")
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	return port, l.Close()
}

// readFrom returns up to 8 KiB the server logged after offset, for error messages.
func readFrom(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(f, 8<<10))
	return strings.TrimSpace(string(b))
}

func (c *Cluster) createDatabase(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.AdminDSN())
	if err != nil {
		return fmt.Errorf("pgcluster: connect: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	var exists bool
	err = conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", c.database).Scan(&exists)
	if err != nil || exists {
		return err
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{c.database}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database: fine, it exists
		return nil
	}
	if err != nil {
		return fmt.Errorf("pgcluster: create database %s: %w", c.database, err)
	}
	return nil
}

// run executes one of the Postgres binaries as the server user and returns its output
// in the error, never on our stdout.
func (c *Cluster) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	// The server user may not be allowed into our working directory, and initdb fails
	// when it cannot resolve its own cwd.
	cmd.Dir = "/"
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	err := cmd.Run()
	c.log.Debug("pgcluster: ran "+name, "args", args, "output", strings.TrimSpace(out.String()), "err", err)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%s %s: %w", name, args[0], context.Cause(ctx)) // its output is just noise then
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, args[0], err, strings.TrimSpace(out.String()))
	}
	return nil
}
