"""Packaging for esper, reading its metadata from settings.ini (the nbdev 2 layout).

nbdev_export writes pyproject.toml with these fields marked dynamic; setup.py fills every one of them.
"""
from configparser import ConfigParser

import setuptools

config = ConfigParser(delimiters=["="])
config.read("settings.ini", encoding="utf-8")
cfg = config["DEFAULT"]

requirements = cfg.get("requirements", "").split()
dev_requirements = cfg.get("dev_requirements", "").split()
ray_requirements = cfg.get("ray_requirements", "").split()
console_scripts = cfg.get("console_scripts", "").split()

setuptools.setup(
    name=cfg["lib_name"],
    version=cfg["version"],
    description=cfg["description"],
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    author=cfg["author"],
    author_email=cfg["author_email"],
    license="Apache-2.0",
    url=cfg["git_url"],
    packages=setuptools.find_packages(include=["esper", "esper.*"]),
    include_package_data=True,
    python_requires=">=" + cfg["min_python"],
    install_requires=requirements,
    extras_require={"dev": dev_requirements + ray_requirements, "ray": ray_requirements},
    entry_points={"console_scripts": console_scripts, "nbdev": [f"{cfg['lib_path']}={cfg['lib_path']}._modidx:d"]},
    keywords=cfg.get("keywords", "").split(),
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
        "License :: OSI Approved :: Apache Software License",
    ],
    project_urls={"Documentation": cfg["doc_host"] + cfg["doc_baseurl"], "Source": cfg["git_url"]},
    zip_safe=False,
)
