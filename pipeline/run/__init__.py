"""Running a module: the GLUE data, the models and their tokenizers, LoRA recovery training, evaluation on
the validation split and the efficiency measurements (scaling, memory, throughput).
"""
