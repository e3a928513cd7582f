# SPDX-License-Identifier: MIT
"""Cut the topology.conf / topology.yaml texts out of a git checkout of SchedMD/slurm: the
<pre> blocks of doc/html, the .nf blocks of the man pages, the triple-quoted strings of the
Python test suite (dedented), and whole .conf/.yaml files. Usage: extract_slurm.py GITDIR
OUTDIR; prints file, path, line, commit (tab-separated) per text written."""
import html
import os
import re
import subprocess
import sys
import textwrap
repo=sys.argv[1]; out=sys.argv[2]; os.makedirs(out,exist_ok=True)
commit=subprocess.run(['git','-C',repo,'rev-parse','HEAD'],capture_output=True,text=True).stdout.strip()
files=subprocess.run(['git','-C',repo,'grep','-lE','SwitchName=|BlockName=|RingName=|topology:','HEAD','--','testsuite','doc'],capture_output=True,text=True).stdout.split()
files+=['HEAD:'+p for p in subprocess.run(['git','-C',repo,'ls-tree','-r','--name-only','HEAD','testsuite/python/tests/test_150_9_testcases'],capture_output=True,text=True).stdout.split()]
seen=set(); idx=[]
for f in dict.fromkeys(files):
    path=f.split(':',1)[1]
    txt=subprocess.run(['git','-C',repo,'show',f],capture_output=True,text=True).stdout
    cands=[]
    if path.endswith('.py'):
        for m in re.finditer(r'(?:"""|\'\'\')(.*?)(?:"""|\'\'\')',txt,re.S): cands.append((txt[:m.start()].count('\n')+1,textwrap.dedent(m.group(1)).strip('\n').removeprefix('\\\n')))
    elif path.endswith('.shtml'):
        for m in re.finditer(r'<pre>(.*?)</pre>',txt,re.S):
            c=re.sub(r'<[^>]+>','',m.group(1)); cands.append((txt[:m.start()].count('\n')+1,html.unescape(c).strip('\n')))
    elif re.search(r'man/man\d/',path):
        for m in re.finditer(r'^\.nf\n(.*?)^\.fi',txt,re.S|re.M):
            c=m.group(1); c=re.sub(r'^\.(br|sp|IP|PP|TP|RS|RE)\b.*\n','',c,flags=re.M); c=c.replace('\\-','-').replace('\\(dq','"').replace('\\\\','\\').replace('\\fB','').replace('\\fR','').replace('\\fI','')
            cands.append((txt[:m.start()].count('\n')+1,c))
    elif path.endswith(('.conf','.yaml')):
        cands.append((1,txt))
    for line,c in cands:
        conf=re.search(r'^\s*(SwitchName|BlockName|RingName)=',c,re.M)
        yml=re.search(r'^\s*-?\s*topology:',c,re.M)
        if not (conf or yml): continue
        if c in seen: continue
        seen.add(c)
        kind='yaml' if (yml and not conf) or path.endswith('.yaml') else 'conf'
        base=re.sub(r'[^A-Za-z0-9]+','-',path).strip('-')
        fn=f"{base}-L{line}.{kind}"
        open(os.path.join(out,fn),'w').write(c if c.endswith('\n') else c+'\n')
        idx.append((fn,path,line))
for fn,p,l in idx: print(fn,p,l,commit,sep='\t')
