"""What is measured and how it is recorded (no torch): the raw-log format (records, status, seals),
and the definitions of the quantities in it: FLOPs and MFU, energy, exposed communication by interval
algebra, nccl-tests' algbw and busbw. In: specs and measured values. Out: raw-log records and metrics."""
