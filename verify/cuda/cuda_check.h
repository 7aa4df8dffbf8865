/* The accuracy checks of cuda-check (cuda-check-gate.c): exit statuses. */
#ifndef FALCON_CUDA_CHECK_H
#define FALCON_CUDA_CHECK_H

int cuda_check_emulate(void);
int cuda_check_device(int quick);
/* The backward's (cuda-check-grad.c): the gradient gate's quick table. */
int cuda_check_grad_emulate(void);
int cuda_check_grad_device(int quick); /* quick: one case per variant (for compute-sanitizer) */

#endif
