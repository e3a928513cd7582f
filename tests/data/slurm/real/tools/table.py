# SPDX-License-Identifier: MIT
"""The README's table: run every file of ROWS (file, repository, path, line, commit, licence;
tab-separated) through topology_from_slurm and print one Markdown row each. Usage, from a
build: meson devenv -C build /usr/bin/python3 table.py REALDIR ROWS"""
import os
import re
import sys

from topoplace.importers import topology_from_slurm
D=sys.argv[1]
rows=[l.rstrip('\n').split('\t') for l in open(sys.argv[2])]
out=[]
for fn,repo,path,line,commit,lic in rows:
    t=open(os.path.join(D,fn)).read()
    try:
        topo,w=topology_from_slurm(t,1); res='imported'
        if w: res+=' (%d warning%s)'%(len(w),'' if len(w)==1 else 's')
    except Exception as e:
        m=str(e)
        m=re.sub(r"line \d+: ","",m); m=re.sub(r"^topology '[^']*'(: | )?","",m)
        for k in ("recognised but not yet supported","is flat (topology/flat)","every switch is empty","no block has nodes"):
            if k in m: m=k; break
        res='refused: '+m[:70].rstrip()
    slurm_bad='test_150_9_testcases' in path
    out.append((fn,repo,path,line,commit[:12],lic.split()[0],res,'refuses' if slurm_bad else 'accepts'))
for r in out: print('| '+' | '.join(('`%s`'%r[0],r[1],'`%s`'%r[2],r[3],r[4],r[5],r[7],r[6].replace('|','\\|')))+' |')
