/* SPDX-License-Identifier: MIT */
/*
 * A CUDA driver too old for Vitamin-E (tests/fault/test_fault_nodriver.c):
 * no cuGetProcAddress_v2, a few entry points that answer with their own
 * error codes, everything else missing.
 */
typedef int CUresult;

CUresult cuInit(unsigned flags);
CUresult cuInit(unsigned flags)
{
	(void)flags;
	return 100; /* CUDA_ERROR_NO_DEVICE */
}

CUresult cuCtxSynchronize(void);
CUresult cuCtxSynchronize(void)
{
	return 201; /* CUDA_ERROR_INVALID_CONTEXT */
}

CUresult cuStreamSynchronize(void *s);
CUresult cuStreamSynchronize(void *s)
{
	(void)s;
	return 201;
}
