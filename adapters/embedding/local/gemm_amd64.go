package local

import "golang.org/x/sys/cpu"

// hasFMA reports whether the assembly kernels can run here.
var hasFMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// kernel6x16FMA and the kernels of fewer rows are kernelGo in AVX2/FMA assembly, on
// raw pointers, each for its number of rows.
//
//go:noescape
func kernel6x16FMA(a *float32, lda int, b *float32, k int, c *float32, ldc int)

//go:noescape
func kernel4x16FMA(a *float32, lda int, b *float32, k int, c *float32, ldc int)

//go:noescape
func kernel2x16FMA(a *float32, lda int, b *float32, k int, c *float32, ldc int)

//go:noescape
func kernel1x16FMA(a *float32, lda int, b *float32, k int, c *float32, ldc int)

// kernel runs one block of m rows (blockRows, 4, 2 or 1) × panelWidth columns of a
// product.
func kernel(m int, a []float32, lda int, b []float32, c []float32, ldc int) {
	k := len(b) / panelWidth
	if !hasFMA {
		kernelGo(m, a, lda, b, k, c, ldc)
		return
	}
	_ = a[(m-1)*lda+k-1]
	_ = c[(m-1)*ldc+panelWidth-1]
	switch m {
	case blockRows:
		kernel6x16FMA(&a[0], lda, &b[0], k, &c[0], ldc)
	case 4:
		kernel4x16FMA(&a[0], lda, &b[0], k, &c[0], ldc)
	case 2:
		kernel2x16FMA(&a[0], lda, &b[0], k, &c[0], ldc)
	case 1:
		kernel1x16FMA(&a[0], lda, &b[0], k, &c[0], ldc)
	default:
		panic("local: no kernel for this number of rows")
	}
}
