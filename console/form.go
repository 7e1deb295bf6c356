package console

import (
	"mime"
	"net/http"
	"net/url"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// readForm reads r's body through the gate before anything else looks at r: at most
// maxBodyBytes (413 otherwise, on the declared length alone when there is one, and
// before a byte is parsed), then, for a POST, its URL-encoded form into r.PostForm
// and r.Form. No handler parses a body itself: the form methods of r find the form
// parsed and never read the body again. The body's reservation in the gate's
// in-flight budget ends here, since only the parsed form is kept.
func (c *Console) readForm(r *http.Request) error {
	r.PostForm = url.Values{}
	r.Form = r.URL.Query()
	if r.ContentLength == 0 {
		return nil
	}
	body, release, err := c.cfg.Gate.ReadBody(r, maxBodyBytes)
	release()
	r.Body = http.NoBody
	if err != nil || r.Method != http.MethodPost || len(body) == 0 {
		return err
	}
	if media, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || media != "application/x-www-form-urlencoded" {
		return runtime.Errorf(contract.CodeUnsupportedMediaType, "a console form must be application/x-www-form-urlencoded").
			With("field", "Content-Type")
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return runtime.Invalid("form", "the form is malformed")
	}
	r.PostForm = form
	for k, vs := range form {
		r.Form[k] = append(r.Form[k], vs...)
	}
	return nil
}
