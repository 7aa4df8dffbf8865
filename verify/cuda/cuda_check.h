/* The accuracy checks of cuda-check (cuda-check-gate.c): exit statuses. */
#ifndef FALCON_CUDA_CHECK_H
#define FALCON_CUDA_CHECK_H

int cuda_check_emulate(void);
int cuda_check_device(int quick);

#endif
