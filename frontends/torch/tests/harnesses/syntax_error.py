MESH = {"dp": 2
def build_logical():
    pass
