//go:build !amd64

package local

// hasFMA is false off amd64: the portable kernel runs.
const hasFMA = false

// kernel runs one block of m rows × panelWidth columns of a product.
func kernel(m int, a []float32, lda int, b []float32, c []float32, ldc int) {
	kernelGo(m, a, lda, b, len(b)/panelWidth, c, ldc)
}
