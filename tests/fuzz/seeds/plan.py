# plan
[[("forward", 1410), ('backward', 1000),],
 [("forward", 990)]]
