package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/contract/client"
)

const transferUsage = `usage:
  agent-context export --out FILE [--conversation ID] [--include KINDS] [connection flags]
      export the scope (or one conversation) through POST /exports, wait for the
      operation, and write the artifact to FILE, every chunk and the whole checked
      against their SHA-256. KINDS is a comma-separated subset of
      messages,windows,derivations,invocations,entries.

  agent-context import [--part-bytes N] [connection flags] FILE
      import an agent-context-ndjson/v1 FILE into the scope through POST /imports.
      A file larger than one request (16 MiB) is sent in parts cut at record
      boundaries, each with its own header: each part is atomic, the whole is not.

  connection flags:
      --url URL          the service (default http://AGENT_CONTEXT_BIND)
      --token TOKEN      bearer token (default AGENT_CONTEXT_SERVICE_TOKEN); it needs
                         context:admin
      --tenant T, --project P
                         the scope headers of static-token and open mode
`

// transferHTTP is the commands' HTTP client: an import part of 16 MiB may take a
// while to commit.
var transferHTTP = &http.Client{Timeout: 10 * time.Minute}

// transferFlags are the connection flags of export and import.
type transferFlags struct {
	url, token, tenant, project string
}

func (f *transferFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "url", "", "")
	fs.StringVar(&f.token, "token", "", "")
	fs.StringVar(&f.tenant, "tenant", "", "")
	fs.StringVar(&f.project, "project", "", "")
}

// client returns the typed client the flags (and the environment's defaults) name.
func (f *transferFlags) client(getenv func(string) string) (*client.Client, error) {
	cfg, err := LoadConfig(getenv)
	if err != nil {
		return nil, err
	}
	base := f.url
	if base == "" {
		base = "http://" + probeAddr(cfg.Bind)
	}
	token := f.token
	if token == "" {
		token = cfg.ServiceToken
	}
	opts := []client.Option{client.WithBaseURL(base), client.WithBearerToken(token), client.WithHTTPClient(transferHTTP)}
	if f.tenant != "" {
		opts = append(opts, client.WithHeader("x-infra-tenant-id", f.tenant))
	}
	if f.project != "" {
		opts = append(opts, client.WithHeader("x-infra-project-id", f.project))
	}
	return client.New(opts...), nil
}

// parseTransferFlags parses args into fs; -h prints the usage and reports done.
func parseTransferFlags(fs *flag.FlagSet, args []string, stdout io.Writer) (done bool, err error) {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			_, err = io.WriteString(stdout, transferUsage)
			return true, err
		}
		return true, usageError{fmt.Sprintf("%s: %v\n%s", fs.Name(), err, transferUsage)}
	}
	return false, nil
}

// exportCommand runs `agent-context export`.
func exportCommand(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	var conn transferFlags
	conn.register(fs)
	out := fs.String("out", "", "")
	conversation := fs.String("conversation", "", "")
	include := fs.String("include", "", "")
	if done, err := parseTransferFlags(fs, args, stdout); done {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		return usageError{"export needs --out FILE and no arguments\n" + transferUsage}
	}
	c, err := conn.client(getenv)
	if err != nil {
		return err
	}
	req := &contract.ExportRequest{}
	if *conversation != "" {
		req.ConversationID = conversation
	}
	if *include != "" {
		req.Include = strings.Split(*include, ",")
	}
	started, err := c.Export(ctx, req)
	if err != nil {
		return err
	}
	op, err := awaitOperation(ctx, c, started.Operation.ID)
	if err != nil {
		return err
	}
	var result contract.ExportResult
	if err := json.Unmarshal(op.Result, &result); err != nil {
		return fmt.Errorf("export %s: read its result: %w", op.ID, err)
	}
	art, err := c.GetArtifact(ctx, &contract.GetArtifactRequest{ArtifactID: result.ArtifactID})
	if err != nil {
		return err
	}
	if err := writeArtifact(ctx, c, art, *out); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "exported artifact %s to %s: %d bytes in %d chunks, sha256 %s\n",
		art.ID, *out, art.TotalBytes, art.ChunkCount, *art.SHA256)
	return err
}

// awaitOperation polls an operation until it finishes; a failed one is an error.
func awaitOperation(ctx context.Context, c *client.Client, id string) (*contract.Operation, error) {
	for {
		res, err := c.GetOperation(ctx, &contract.GetOperationRequest{OperationID: id})
		if err != nil {
			return nil, err
		}
		switch op := res.Operation; op.State {
		case contract.OperationSucceeded:
			return &op, nil
		case contract.OperationFailed:
			return nil, fmt.Errorf("operation %s failed: %s: %s", id, op.Error.Code, op.Error.Message)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// writeArtifact writes the artifact's chunks to path through a temporary file beside
// it, renamed into place only once every chunk and the whole matched their SHA-256.
func writeArtifact(ctx context.Context, c *client.Client, art *contract.ExportArtifact, path string) (err error) {
	if art.SHA256 == nil {
		return fmt.Errorf("artifact %s is %s, not ready", art.ID, art.State)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.part")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	whole := sha256.New()
	w := bufio.NewWriter(io.MultiWriter(tmp, whole))
	for i := range art.ChunkCount {
		chunk, err := c.GetChunk(ctx, &contract.GetChunkRequest{ArtifactID: art.ID, Index: &i})
		if err != nil {
			return err
		}
		data, err := base64.StdEncoding.DecodeString(chunk.Data)
		if err != nil {
			return fmt.Errorf("chunk %d: %w", i, err)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != chunk.SHA256 {
			return fmt.Errorf("chunk %d does not match its SHA-256", i)
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if hex.EncodeToString(whole.Sum(nil)) != *art.SHA256 {
		return fmt.Errorf("artifact %s does not match its SHA-256", art.ID)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// importCommand runs `agent-context import`.
func importCommand(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	var conn transferFlags
	conn.register(fs)
	partBytes := fs.Int("part-bytes", contract.MaxImportDataBytes, "")
	if done, err := parseTransferFlags(fs, args, stdout); done {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"import needs one FILE\n" + transferUsage}
	}
	if *partBytes < 1 || *partBytes > contract.MaxImportDataBytes {
		return usageError{fmt.Sprintf("--part-bytes must be between 1 and %d\n%s", contract.MaxImportDataBytes, transferUsage)}
	}
	c, err := conn.client(getenv)
	if err != nil {
		return err
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	// A first pass checks the whole file (the header's counts above all) before a
	// part is sent, so a bad file imports nothing.
	if err := splitImport(bufio.NewReader(f), *partBytes, func([]byte) error { return nil }); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	var total contract.ImportResponse
	parts := 0
	err = splitImport(bufio.NewReader(f), *partBytes, func(part []byte) error {
		data := base64.StdEncoding.EncodeToString(part)
		format := contract.FormatNDJSON
		res, err := c.Import(ctx, &contract.ImportRequest{Format: &format, Data: &data})
		if err != nil {
			return fmt.Errorf("part %d: %w", parts+1, err)
		}
		parts++
		addCounts(&total.Imported, res.Imported)
		addCounts(&total.Skipped, res.Skipped)
		return nil
	})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "imported %s in %d part(s): %s; skipped %s\n", fs.Arg(0), parts,
		countsText(total.Imported), countsText(total.Skipped))
	return err
}

// splitImport reads an agent-context-ndjson/v1 stream and hands send parts of at most
// maxBytes, each its own stream: a header with the counts of its records, then the
// records, cut at line boundaries. The file's own header must be first and its
// counts must match the records.
func splitImport(r *bufio.Reader, maxBytes int, send func([]byte) error) error {
	first, err := readLine(r)
	if err != nil {
		return fmt.Errorf("read the header: %w", err)
	}
	var header contract.ExportHeader
	if err := json.Unmarshal(first, &header); err != nil || header.Type != contract.RecordHeader {
		return errors.New("the file does not start with an agent-context-ndjson/v1 header line")
	}
	var part bytes.Buffer
	var counts, seen contract.RecordCounts
	flush := func() error {
		if part.Len() == 0 {
			return nil
		}
		head, err := json.Marshal(contract.ExportHeader{Type: contract.RecordHeader, FormatVersion: header.FormatVersion,
			ExportedAtMs: header.ExportedAtMs, Counts: counts})
		if err != nil {
			return err
		}
		err = send(append(append(head, '\n'), part.Bytes()...))
		part.Reset()
		counts = contract.RecordCounts{}
		return err
	}
	for line := 2; ; line++ {
		l, err := readLine(r)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		var typed struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(l, &typed); err != nil {
			return fmt.Errorf("line %d is not a JSON record", line)
		}
		if len(l)+1+headerRoom > maxBytes {
			return fmt.Errorf("line %d (%d bytes) does not fit one import request of %d bytes", line, len(l), maxBytes)
		}
		if part.Len()+len(l)+1+headerRoom > maxBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		for _, c := range []*contract.RecordCounts{&counts, &seen} {
			if err := countRecord(c, typed.Type); err != nil {
				return fmt.Errorf("line %d: %w", line, err)
			}
		}
		part.Write(l)
		part.WriteByte('\n')
	}
	if seen != header.Counts {
		return fmt.Errorf("the header's counts (%s) do not match the file's records (%s)", countsText(header.Counts), countsText(seen))
	}
	if seen == (contract.RecordCounts{}) {
		// An export without records still imports (and is checked) as one request.
		return send(append(first, '\n'))
	}
	return flush()
}

// headerRoom is the most a part's header line takes.
const headerRoom = 256

// readLine reads one line without its newline; io.EOF at the end.
func readLine(r *bufio.Reader) ([]byte, error) {
	l, err := r.ReadBytes('\n')
	if errors.Is(err, io.EOF) && len(l) > 0 {
		return l, nil
	}
	if err != nil {
		return nil, err
	}
	return l[:len(l)-1], nil
}

func countRecord(c *contract.RecordCounts, typ string) error {
	switch typ {
	case contract.RecordMessage:
		c.Messages++
	case contract.RecordWindow:
		c.Windows++
	case contract.RecordDerivation:
		c.Derivations++
	case contract.RecordInvocation:
		c.Invocations++
	case contract.RecordEntry:
		c.Entries++
	default:
		return fmt.Errorf("unknown record type %q", typ)
	}
	return nil
}

func addCounts(dst *contract.RecordCounts, c contract.RecordCounts) {
	dst.Messages += c.Messages
	dst.Windows += c.Windows
	dst.Derivations += c.Derivations
	dst.Invocations += c.Invocations
	dst.Entries += c.Entries
}

func countsText(c contract.RecordCounts) string {
	return fmt.Sprintf("%d messages, %d windows, %d derivations, %d invocations, %d entries",
		c.Messages, c.Windows, c.Derivations, c.Invocations, c.Entries)
}
